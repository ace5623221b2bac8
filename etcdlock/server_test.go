package etcdlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdBinary is the server the tests start: Debian's etcd-server package.
const etcdBinary = "etcd"

// etcdServer is a one-member etcd of the tests' own, on free ports of
// 127.0.0.1, with its data in a temporary directory.
type etcdServer struct {
	endpoint string
	dir      string
	cmd      *exec.Cmd
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startEtcd starts a server and waits until it answers.
func startEtcd() (*etcdServer, error) {
	if _, err := exec.LookPath(etcdBinary); err != nil {
		return nil, err
	}
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "etcdlock-test-")
	if err != nil {
		return nil, err
	}
	s := &etcdServer{endpoint: "http://" + client, dir: dir}
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s.cmd = exec.Command(etcdBinary, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", s.endpoint, "--advertise-client-urls", s.endpoint,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "test=http://"+peer)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: time.Second})
	if err != nil {
		s.close()
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			s.close()
			return nil, fmt.Errorf("etcd on %s did not answer: %w\n%s", s.endpoint, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL and waits for it.
func (s *etcdServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

func (s *etcdServer) close() {
	s.kill()
	os.RemoveAll(s.dir)
}

// client returns a client of the server, closed when the test ends.
func (s *etcdServer) client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// privateEtcd starts a server for one test, which may kill it.
func privateEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s, err := startEtcd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// stop pauses the server with SIGSTOP: it keeps its connections open and
// answers nothing, as a hung server does, until cont.
func (s *etcdServer) stop() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// cont resumes a server paused by stop.
func (s *etcdServer) cont() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

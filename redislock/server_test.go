package redislock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBinary is the server the tests start: Debian's redis-server package.
const redisBinary = "redis-server"

// redisServer is a redis-server of the tests' own, on a free port of
// 127.0.0.1, with persistence off: a restart starts empty, like a failover
// to a replica that had not seen the latest writes.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts a server on a free port and waits until it answers.
func startRedis() (*redisServer, error) {
	if _, err := exec.LookPath(redisBinary); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "redislock-test-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: addr, dir: dir}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *redisServer) start() error {
	_, port, _ := net.SplitHostPort(s.addr)
	s.cmd = exec.Command(redisBinary, "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--enable-debug-command", "local", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL and waits for it.
func (s *redisServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// close kills the server and removes its directory.
func (s *redisServer) close() {
	s.kill()
	os.RemoveAll(s.dir)
}

// client returns a client of the server, closed when the test ends.
func (s *redisServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// privateRedis starts a server for one test, which may kill and restart
// it; it is killed when the test ends.
func privateRedis(t *testing.T) *redisServer {
	t.Helper()
	s, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

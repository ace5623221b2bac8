package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Binaries are the PostgreSQL server programs a local server needs. pg_ctl
// is not among them: we own the postmaster process and signal it directly.
type Binaries struct {
	// Initdb is the path of initdb.
	Initdb string
	// Postgres is the path of the postgres server.
	Postgres string
}

// errNoBinaries is returned by FindBinaries when no directory holds both
// initdb and postgres.
var errNoBinaries = errors.New("initdb and postgres not found on PATH, under `pg_config --bindir` or in /usr/lib/postgresql/*/bin")

// binaryLookup holds the lookups FindBinaries uses, so tests can replace them.
type binaryLookup struct {
	lookPath       func(file string) (string, error)
	pgConfigBindir func() (string, error)
	glob           func(pattern string) ([]string, error)
	isExecutable   func(path string) bool
}

func defaultBinaryLookup() binaryLookup {
	return binaryLookup{
		lookPath:       exec.LookPath,
		pgConfigBindir: pgConfigBindir,
		glob:           filepath.Glob,
		isExecutable:   isExecutable,
	}
}

// FindBinaries looks for initdb and postgres on PATH, then in the directory
// `pg_config --bindir` names, then in the highest version under
// /usr/lib/postgresql (Debian and Ubuntu install there, off PATH).
func FindBinaries() (Binaries, error) {
	return defaultBinaryLookup().find()
}

func (l binaryLookup) find() (Binaries, error) {
	initdb, err1 := l.lookPath("initdb")
	postgres, err2 := l.lookPath("postgres")
	if err1 == nil && err2 == nil {
		return Binaries{Initdb: initdb, Postgres: postgres}, nil
	}
	if dir, err := l.pgConfigBindir(); err == nil {
		if b, ok := l.inDir(dir); ok {
			return b, nil
		}
	}
	dirs, _ := l.glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		// Highest version first; "9.6" sorts below "10".
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range dirs {
		if b, ok := l.inDir(dir); ok {
			return b, nil
		}
	}
	return Binaries{}, errNoBinaries
}

func (l binaryLookup) inDir(dir string) (Binaries, bool) {
	b := Binaries{Initdb: filepath.Join(dir, "initdb"), Postgres: filepath.Join(dir, "postgres")}
	return b, l.isExecutable(b.Initdb) && l.isExecutable(b.Postgres)
}

// compareVersions compares dotted version numbers numerically; parts that
// are not numbers compare as zero.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if c := x - y; c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func pgConfigBindir() (string, error) {
	path, err := exec.LookPath("pg_config")
	if err != nil {
		return "", err
	}
	// pg_config only prints what it was built with; a few seconds is plenty.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("pg_config --bindir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

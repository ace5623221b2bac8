package pgbouncer_test

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, nil)) }

package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// ScanJobRowsBothWays runs query, whose columns are the full job columns
// (as claim_flow.sql returns them), and reads every row with
// collectJobRows' own decoding (nil for a row it leaves to pgx, or when
// the result does not fit it) and with pgx's scan, for comparing the two.
func ScanJobRowsBothWays(ctx context.Context, db querier, query string, args ...any) (fast, generic []*JobRow, err error) {
	return scanBothWays(ctx, db, func() jobsql.RowScanner { return &jobsql.Scanner{} }, query, args...)
}

// ScanClaimedRowsBothWays is ScanJobRowsBothWays for the rows of
// claim.sql, which leave out what fill gives.
func ScanClaimedRowsBothWays(ctx context.Context, db querier, fill jobsql.ClaimFill, query string, args ...any) (fast, generic []*JobRow, err error) {
	return scanBothWays(ctx, db, func() jobsql.RowScanner { return jobsql.NewClaimScanner(fill) }, query, args...)
}

type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

func scanBothWays(ctx context.Context, db querier, scanner func() jobsql.RowScanner, query string, args ...any) (fast, generic []*JobRow, err error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fs, gs := scanner(), scanner()
	fits, checked := false, false
	for rows.Next() {
		if !checked {
			fits, checked = fs.FastScanFits(rows), true
		}
		var f *JobRow
		if fits {
			f = fs.FastScan(rows.RawValues())
		}
		g, err := gs.Scan(rows)
		if err != nil {
			return nil, nil, err
		}
		fast, generic = append(fast, f), append(generic, g)
	}
	return fast, generic, rows.Err()
}

// ClaimFill is what claim.sql's rows of queue leave out, for a claim by
// worker with lease.
func ClaimFill(queue, worker string, lease time.Duration) jobsql.ClaimFill {
	return jobsql.ClaimFill{Queue: queue, WorkerID: worker, Lease: lease}
}

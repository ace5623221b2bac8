package pgqueue

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// jobListCursor is where a JobList page ended: the ordering it was read in
// and the last row's sort value and id. Encoded, it is the opaque
// JobListResult.NextCursor.
type jobListCursor struct {
	Order JobListOrder `json:"o"`
	Desc  bool         `json:"d,omitempty"`
	// At is the last row's sort value in Unix microseconds, PostgreSQL's
	// precision, so the value round-trips exactly; unused for OrderID.
	At int64 `json:"t,omitempty"`
	ID int64 `json:"i"`
}

// newJobListCursor returns the cursor after row in the given ordering.
func newJobListCursor(order JobListOrder, desc bool, row *JobRow) jobListCursor {
	c := jobListCursor{Order: order, Desc: desc, ID: row.ID}
	switch order {
	case JobListOrderCreatedAt:
		c.At = row.CreatedAt.UnixMicro()
	case JobListOrderRunAt:
		c.At = row.RunAt.UnixMicro()
	case JobListOrderFinalizedAt:
		c.At = row.FinalizedAt.UnixMicro()
	}
	return c
}

func (c jobListCursor) encode() string {
	b, err := json.Marshal(c)
	if err != nil { // a struct of strings, bools and ints always encodes
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeJobListCursor reads s, which must be a cursor JobList returned for
// the same ordering and direction: anything else is ErrInvalid.
func decodeJobListCursor(s string, order JobListOrder, desc bool) (jobListCursor, error) {
	var c jobListCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, fmt.Errorf("%w job list cursor: not base64url: %v", ErrInvalid, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w job list cursor: %v", ErrInvalid, err)
	}
	if c.Order != order || c.Desc != desc {
		return c, fmt.Errorf("%w: cursor of ordering %s, descending %t, used with %s, descending %t",
			ErrInvalid, c.Order, c.Desc, order, desc)
	}
	if c.ID <= 0 {
		return c, fmt.Errorf("%w job list cursor: no job id", ErrInvalid)
	}
	return c, nil
}

// at returns the cursor's sort value as the statement's parameter: nil
// for OrderID, whose statement compares ids only.
func (c jobListCursor) at() any {
	if c.Order == JobListOrderID {
		return nil
	}
	return time.UnixMicro(c.At).UTC()
}

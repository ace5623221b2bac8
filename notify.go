package pgqueue

import (
	"fmt"
	"hash/fnv"
)

// notifyChannel is the NOTIFY channel of a schema's inserts: the schema
// name and "_jobs", kept within PostgreSQL's 63-byte identifier limit.
func notifyChannel(schema string) string {
	const suffix = "_jobs"
	if len(schema)+len(suffix) <= 63 {
		return schema + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(schema))
	return fmt.Sprintf("%s_%08x%s", schema[:63-len(suffix)-9], h.Sum32(), suffix)
}

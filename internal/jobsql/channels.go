package jobsql

import (
	"fmt"
	"hash/fnv"
)

// NotifyChannel is the NOTIFY channel of a schema's inserts: the schema
// name and "_jobs", kept within PostgreSQL's 63-byte identifier limit. The
// payload is a queue name.
func NotifyChannel(schema string) string { return schemaChannel(schema, "_jobs") }

// ControlChannel is the NOTIFY channel of a schema's control messages
// (see the executor's control messages): the schema name and "_control".
func ControlChannel(schema string) string { return schemaChannel(schema, "_control") }

// schemaChannel names a channel of schema: schema+suffix, or, when that
// exceeds 63 bytes, the schema's head and a hash of all of it.
func schemaChannel(schema, suffix string) string {
	if len(schema)+len(suffix) <= 63 {
		return schema + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(schema))
	return fmt.Sprintf("%s_%08x%s", schema[:63-len(suffix)-9], h.Sum32(), suffix)
}

package pgqueue_test

import (
	"fmt"

	"github.com/pgqueue/pgqueue"
)

// The grants an application role needs once the owner migrated the
// schema: run them as the owner.
func ExampleGrantsSQL() {
	sql, err := pgqueue.GrantsSQL("pgqueue", "app")
	if err != nil {
		panic(err)
	}
	fmt.Print(sql)
	// Output:
	// GRANT USAGE ON SCHEMA "pgqueue" TO "app";
	// GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "pgqueue" TO "app";
	// GRANT USAGE ON ALL SEQUENCES IN SCHEMA "pgqueue" TO "app";
	// GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "pgqueue" TO "app";
}

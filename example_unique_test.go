package pgqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

type ChargeArgs struct {
	OrderID int `json:"order_id"`
	Cents   int `json:"cents"`
}

func (ChargeArgs) Kind() string { return "charge" }

// A double click enqueues one charge: the second Enqueue finds the first
// job and returns it as a duplicate.
func ExampleUniqueOpts() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	opts := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{
		ByArgs:       true,
		ByArgsFields: []string{"order_id"}, // one charge per order, whatever the amount says
		ByPeriod:     24 * time.Hour,
	}}
	first, err := client.Enqueue(ctx, ChargeArgs{OrderID: 4711, Cents: 1999}, opts)
	if err != nil {
		panic(err)
	}
	second, err := client.Enqueue(ctx, ChargeArgs{OrderID: 4711, Cents: 1999}, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println("first duplicate:", first.Duplicate)
	fmt.Println("second duplicate:", second.Duplicate, "same job:", second.ID == first.ID)
	// Output:
	// first duplicate: false
	// second duplicate: true same job: true
}

// The SQL function enqueue() inserts a job from a trigger, in the
// transaction of the row change, for Go workers to run.
func Example_enqueueFromSQL() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	_, err := pool.Exec(ctx, `
		CREATE TABLE orders (id bigint PRIMARY KEY, cents int NOT NULL);
		CREATE FUNCTION charge_order() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pgqueue.enqueue('charge',
				jsonb_build_object('order_id', NEW.id, 'cents', NEW.cents),
				unique_key => 'order-' || NEW.id);
			RETURN NEW;
		END $$;
		CREATE TRIGGER charge_order AFTER INSERT ON orders
			FOR EACH ROW EXECUTE FUNCTION charge_order();`)
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES (4711, 1999)"); err != nil {
		panic(err)
	}
	var kind, args string
	if err := pool.QueryRow(ctx, "SELECT kind, args::text FROM pgqueue.jobs").Scan(&kind, &args); err != nil {
		panic(err)
	}
	fmt.Println(kind, args)
	// Output: charge {"cents": 1999, "order_id": 4711}
}

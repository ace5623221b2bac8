package pgqueue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestConfigValidation checks the values New accepts, and the sentinel it
// refuses the others with. New does not touch the database.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	queues := func(name string, maxWorkers int) *pgqueue.Config {
		return &pgqueue.Config{Workers: pgqueue.NewWorkers(), Queues: map[string]pgqueue.QueueConfig{name: {MaxWorkers: maxWorkers}}}
	}
	for _, tc := range []struct {
		name string
		cfg  *pgqueue.Config
		want error // nil: accepted
	}{
		{"NilMeansDefaults", nil, nil},
		{"ZeroValue", &pgqueue.Config{}, nil},
		{"ShortestJobLease", &pgqueue.Config{JobLease: time.Second}, nil},
		{"HeartbeatJustUnderJobLease", &pgqueue.Config{JobLease: 3 * time.Second, HeartbeatInterval: 3*time.Second - time.Nanosecond}, nil},
		{"NegativeJobTimeoutMeansNoLimit", &pgqueue.Config{JobTimeout: -1}, nil},
		{"NegativeClaimBatchDelayMeansAtOnce", &pgqueue.Config{ClaimBatchDelay: -1}, nil},
		{"CustomSchema", &pgqueue.Config{Schema: "jobs_custom"}, nil},
		{"RetainForeverEveryState", &pgqueue.Config{CompletedJobRetention: pgqueue.RetainForever, CancelledJobRetention: pgqueue.RetainForever, DiscardedJobRetention: pgqueue.RetainForever}, nil},
		{"ShortestRetentions", &pgqueue.Config{CompletedJobRetention: time.Nanosecond, CancelledJobRetention: time.Nanosecond, DiscardedJobRetention: time.Nanosecond}, nil},
		{"LongestQueueName", queues(strings.Repeat("q", 63), 1), nil},
		{"QueueNameWithDotsAndDashes", queues("mail.eu-west_1", 1), nil},

		{"NegativeJobLease", &pgqueue.Config{JobLease: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeHeartbeatInterval", &pgqueue.Config{HeartbeatInterval: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeRescueInterval", &pgqueue.Config{RescueInterval: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeFetchPollInterval", &pgqueue.Config{FetchPollInterval: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeSchedulerInterval", &pgqueue.Config{SchedulerInterval: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeUnknownKindDelay", &pgqueue.Config{UnknownKindDelay: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeCancelGrace", &pgqueue.Config{CancelGrace: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeLeaderTTL", &pgqueue.Config{LeaderTTL: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeSingletonRetryDelay", &pgqueue.Config{SingletonRetryDelay: -time.Second}, pgqueue.ErrInvalid},
		{"NegativeCompletedJobRetention", &pgqueue.Config{CompletedJobRetention: -time.Hour}, pgqueue.ErrInvalid},
		{"NegativeCancelledJobRetention", &pgqueue.Config{CancelledJobRetention: pgqueue.RetainForever - 1}, pgqueue.ErrInvalid},
		{"NegativeDiscardedJobRetention", &pgqueue.Config{DiscardedJobRetention: -2 * time.Nanosecond}, pgqueue.ErrInvalid},
		{"NegativePruneInterval", &pgqueue.Config{PruneInterval: -time.Second}, pgqueue.ErrInvalid},
		{"JobLeaseUnderOneSecond", &pgqueue.Config{JobLease: time.Second - time.Millisecond}, pgqueue.ErrInvalid},
		{"HeartbeatEqualToJobLease", &pgqueue.Config{JobLease: 3 * time.Second, HeartbeatInterval: 3 * time.Second}, pgqueue.ErrInvalid},
		{"HeartbeatLongerThan30s", &pgqueue.Config{HeartbeatInterval: time.Minute}, pgqueue.ErrInvalid},
		{"NegativeCompleteBatchSize", &pgqueue.Config{CompleteBatchSize: -1}, pgqueue.ErrInvalid},
		{"NegativeCompleteBatchDelay", &pgqueue.Config{CompleteBatchDelay: -1}, pgqueue.ErrInvalid},
		{"NegativeMaxArgsSize", &pgqueue.Config{MaxArgsSize: -1}, pgqueue.ErrInvalid},
		{"ZeroMaxWorkers", queues("a", 0), pgqueue.ErrInvalid},
		{"NegativeMaxWorkers", queues("a", -1), pgqueue.ErrInvalid},

		{"QueueWithPunctuation", queues("Bad!", 1), pgqueue.ErrInvalid},
		{"QueueUpperCase", queues("Mail", 1), pgqueue.ErrInvalid},
		{"QueueWithSpace", queues("no spaces", 1), pgqueue.ErrInvalid},
		{"QueueEmpty", queues("", 1), pgqueue.ErrInvalid},
		{"QueueStartsWithDash", queues("-a", 1), pgqueue.ErrInvalid},
		{"QueueTooLong", queues(strings.Repeat("q", 64), 1), pgqueue.ErrInvalid},

		{"SchemaInjection", &pgqueue.Config{Schema: `x"; drop`}, pgqueue.ErrInvalid},
		{"SchemaUpperCase", &pgqueue.Config{Schema: "Jobs"}, pgqueue.ErrInvalid},
		{"SchemaStartsWithDigit", &pgqueue.Config{Schema: "1jobs"}, pgqueue.ErrInvalid},
		{"SchemaWithDash", &pgqueue.Config{Schema: "my-jobs"}, pgqueue.ErrInvalid},
		{"SchemaTooLong", &pgqueue.Config{Schema: strings.Repeat("s", 64)}, pgqueue.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pgqueue.New(pool, tc.cfg)
			if tc.want == nil && err != nil {
				t.Fatalf("New: %v, want no error", err)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("New: err = %v, want %v", err, tc.want)
			}
		})
	}
}

package pgqueue

import (
	"time"
)

// Observer is told what a client's own loops do that no middleware and no
// error handler sees: the size of each claim and of each batch of results
// written, what became of each job, writes refused by a job's fence,
// jobs rescued after their lease expired, and, from the maintenance
// leader, the queues' counts. It is Config.Observer; package otelpgqueue
// turns it into OpenTelemetry metrics.
//
// Every field may be nil. The functions run on the client's goroutines,
// several at once, on the path of every job: they must be quick, must not
// block and must not call the client.
type Observer struct {
	// Claimed is called after each claim that took jobs, with the queue
	// and how many it took.
	Claimed func(queue string, jobs int)

	// Written is called after each batch of results is written, with how
	// many results the statement carried.
	Written func(jobs int)

	// Recorded is called for each job whose result was written, with the
	// job as claimed and what became of it. A handler's own CompleteTx
	// counts as ResultCompleted. A job whose cancel was requested while
	// this client did not know it is reported by the result it sent
	// (the row ends cancelled).
	Recorded func(job *JobRow, result JobResult)

	// Refused is called for each write about a job that its fence
	// refused because another claim (a rescue, a retry) took the job
	// over: write is "result" or "heartbeat"; job.Fence is the stale
	// fence.
	Refused func(job *JobRow, write string)

	// Rescued is called by the maintenance leader for each running job
	// whose lease expired and which it put back (or ended, when out of
	// attempts or cancelled).
	Rescued func(job RescuedJob)

	// Queues is called by the maintenance leader every QueuesInterval
	// with the counts of every queue (Client.QueueList), and with nil when
	// this client stops leading: only one client of a schema reports
	// them. A failed read is skipped.
	Queues func(queues []*QueueInfo)
	// QueuesInterval is how often Queues is called. Default
	// DefaultObserverQueuesInterval.
	QueuesInterval time.Duration
}

// DefaultObserverQueuesInterval is Observer.QueuesInterval's default.
const DefaultObserverQueuesInterval = 15 * time.Second

// JobResult is what became of a job once the result of its attempt was
// written, as Observer.Recorded and pgqueuetest report it.
type JobResult string

// The results a job's attempt can have.
const (
	// ResultCompleted: the job completed.
	ResultCompleted JobResult = "completed"
	// ResultRetried: the attempt failed; the job runs again later.
	ResultRetried JobResult = "retried"
	// ResultDiscarded: the attempt failed and the job was discarded (its
	// attempts used up, an error handler's decision, an unknown kind's
	// last try).
	ResultDiscarded JobResult = "discarded"
	// ResultCancelled: the job was cancelled (JobCancel).
	ResultCancelled JobResult = "cancelled"
	// ResultSnoozed: the job runs again later, its attempt given back
	// (JobSnooze, a held singleton key, a kind no worker here knows).
	ResultSnoozed JobResult = "snoozed"
	// ResultReleased: the job was handed back unrun or cut short by Stop,
	// its attempt given back.
	ResultReleased JobResult = "released"
)

// RescuedJob is a job the maintenance leader rescued, as
// Observer.Rescued sees it.
type RescuedJob struct {
	ID          int64
	Queue, Kind string
	// Holder is the ID of the client whose lease expired.
	Holder string
	// State is the job's state after the rescue: scheduled, or discarded
	// (out of attempts) or cancelled (JobCancel asked for it).
	State JobState
}

// resultOf names what the op of a result does to its job.
func resultOf(r *result) JobResult {
	switch r.op {
	case opComplete:
		return ResultCompleted
	case opFail:
		if r.row.Attempt >= r.row.MaxAttempts {
			return ResultDiscarded
		}
		return ResultRetried
	case opDiscard:
		return ResultDiscarded
	case opCancel:
		return ResultCancelled
	case opSnooze, opUnknownKind:
		return ResultSnoozed
	default:
		return ResultReleased
	}
}

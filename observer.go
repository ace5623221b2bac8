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

	// BatchWritten is called after each batch of results is written, with how
	// many results the statement carried.
	BatchWritten func(jobs int)

	// ResultRecorded is called for each job whose result was written, with the
	// job as claimed and what became of it. A handler's own CompleteTx
	// counts as OutcomeCompleted. A job whose cancel was requested while
	// this client did not know it is reported by the result it sent
	// (the row ends cancelled).
	ResultRecorded func(job *JobRow, result Outcome)

	// WriteRefused is called for each write about a job that its fence
	// refused because another claim (a rescue, a retry) took the job
	// over: write says which (WriteResult or WriteHeartbeat); job.Fence
	// is the stale fence.
	WriteRefused func(job *JobRow, write FencedWrite)

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
	// 15s.
	QueuesInterval time.Duration
}

// 15s is Observer.QueuesInterval's default.
const defaultObserverQueuesInterval = 15 * time.Second

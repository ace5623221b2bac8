package executor

import (
	"encoding/json"
	"log/slog"
)

// controlMessage is a notification on the control channel, written by SQL
// (sql/job_cancel.sql) as JSON. Op "cancel" asks the client holding job ID
// under Fence to cancel its handler.
type controlMessage struct {
	Op    string `json:"op"`
	ID    int64  `json:"id"`
	Fence int64  `json:"fence"`
}

// HandleControl acts on one control-channel payload for the jobs of a.
// A cancel for a claim this client has not registered, the usual case
// with many clients, is kept for a while: the job may be claimed ahead and
// waiting for an executor, and is then cancelled as it starts.
func (a *ActiveJobs) HandleControl(payload string, log *slog.Logger) {
	var m controlMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		log.Warn("pgqueue: unreadable control message ignored", "payload", payload, "err", err)
		return
	}
	switch m.Op {
	case "cancel":
		a.requestCancel(m.ID, m.Fence)
	default:
		// A newer client's message: not for this version.
	}
}

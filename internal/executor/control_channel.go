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
// Messages for jobs this client does not run, the usual case with many
// clients, are ignored.
func (a *ActiveJobs) HandleControl(payload string, log *slog.Logger) {
	var m controlMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		log.Warn("pgqueue: unreadable control message ignored", "payload", payload, "err", err)
		return
	}
	switch m.Op {
	case "cancel":
		if j := a.find(m.ID, m.Fence); j != nil {
			j.requestCancel()
		}
	default:
		// A newer client's message: not for this version.
	}
}

package dao

import (
	"errors"
	"testing"

	"paynotify/model"
)

// What the server says of itself decides readiness: a Galera node only
// while Synced and ready, any server only while it takes writes; the
// answer says why not, in words of ours.
func TestServerStateReadiness(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state serverState
		want  string // "" is ready
	}{
		{"PlainServer", serverState{}, ""},
		{"Synced", serverState{galera: true, ready: true, local: "4", comment: "Synced"}, ""},
		{"Desynced", serverState{galera: true, ready: true, local: "2", comment: "Donor/Desynced"},
			"Galera node is Donor/Desynced (wsrep_local_state 2, wsrep_ready ON)"},
		{"NonPrimary", serverState{galera: true, local: "0", comment: "Initialized"},
			"Galera node is Initialized (wsrep_local_state 0, wsrep_ready OFF)"},
		{"Joining", serverState{galera: true, local: "1", comment: "Joining"}, "Galera node is Joining (wsrep_local_state 1, wsrep_ready OFF)"},
		{"ReadOnly", serverState{readOnly: "ON"}, "the server is read-only (read_only ON)"},
		{"SyncedReadOnly", serverState{galera: true, ready: true, local: "4", comment: "Synced", readOnly: "ON"},
			"the server is read-only (read_only ON)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.state.err()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v, want ready", err)
				}
				return
			}
			var nr *model.NotReadyError
			if !errors.As(err, &nr) || nr.Reason != tc.want || !errors.Is(err, model.ErrUnavailable) {
				t.Fatalf("%v, want a NotReadyError (ErrUnavailable) saying %q", err, tc.want)
			}
		})
	}
}

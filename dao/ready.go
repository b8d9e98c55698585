package dao

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"paynotify/model"
)

// readyTTL is how long a Galera node's state, once read, answers Ready: a
// load balancer may ask every instance several times a second, and a
// node's state changes over seconds (a node cut off is non-Primary within
// evs.suspect_timeout), so one read a second is enough.
const readyTTL = time.Second

// Galera's wsrep_local_state when the node is in step with the cluster.
const galeraSynced = "4"

// readiness caches the last state Ready read.
type readiness struct {
	mu    sync.Mutex
	at    time.Time
	state serverState
}

// serverState is what the server says of itself: SHOW GLOBAL STATUS of
// its replication (Galera) and whether it takes writes.
type serverState struct {
	galera   bool   // a wsrep provider is loaded (wsrep_provider_name set)
	ready    bool   // wsrep_ready
	local    string // wsrep_local_state: 4 is Synced
	comment  string // wsrep_local_state_comment, for the answer
	readOnly string // @@global.read_only unless OFF (MariaDB 11 names modes)
}

func (g serverState) err() error {
	if g.galera && !(g.ready && g.local == galeraSynced) {
		return &model.NotReadyError{Reason: fmt.Sprintf("Galera node is %s (wsrep_local_state %s, wsrep_ready %s)",
			g.comment, g.local, onOff(g.ready))}
	}
	if g.readOnly != "" {
		return &model.NotReadyError{Reason: "the server is read-only (read_only " + g.readOnly + ")"}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// Ready reports whether this store's database can serve requests now. It
// pings the server every time, and on MySQL or MariaDB also asks whether
// the server is a Galera node and, if so, whether it is Synced and ready,
// and whether it takes writes (that answer is kept for readyTTL). A ping
// (COM_PING, what database/sql's Ping sends) is not enough: a Galera node
// that is joining or cut off from the Primary component answers COM_PING
// but refuses every query with 1047, and
// a read-only server answers every read but refuses every write (1290).
// What it found is a *model.NotReadyError, which says why.
//
// Only Synced is ready. A Donor serves in principle, but with the rsync
// state transfer it holds a global read lock for the whole copy, so every
// commit on it would wait to its deadline. A Desynced node (wsrep_desync
// ON, as a backup or an operator sets it) still commits correctly, but it
// is out of flow control and may fall behind the cluster by any amount:
// every read of ours waits for it to catch up (wsrep_sync_wait), so a
// notification on it may miss its deadline; the node's operator asked
// for it to be left alone, and readiness does. A read-only server is not
// ready even to a user that could write through it (SUPER, READ ONLY
// ADMIN): it is a replica, or a primary being switched away from, where
// writes must not go. Plain MySQL, MariaDB without Galera and SQLite are
// otherwise ready when they answer the ping.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	if s.driver != DriverMySQL {
		return nil
	}
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	if !s.ready.at.IsZero() && time.Since(s.ready.at) < readyTTL {
		return s.ready.state.err()
	}
	st, err := s.serverState(ctx)
	if err != nil {
		return err
	}
	s.ready.at, s.ready.state = time.Now(), st
	return st.err()
}

// serverState reads the node's wsrep status, then, if it can serve, its
// read_only. A server without Galera has no wsrep rows (MySQL) or an
// empty provider name (MariaDB). SHOW is answered by a node that refuses
// queries, so it is what tells.
func (s *Store) serverState(ctx context.Context) (serverState, error) {
	var st serverState
	err := s.show(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('wsrep_provider_name', 'wsrep_ready', 'wsrep_local_state', 'wsrep_local_state_comment')",
		func(name, value string) {
			switch name {
			case "wsrep_provider_name":
				st.galera = value != ""
			case "wsrep_ready":
				st.ready = value == "ON"
			case "wsrep_local_state":
				st.local = value
			case "wsrep_local_state_comment":
				st.comment = value
			}
		})
	if err != nil || st.err() != nil {
		return st, err
	}
	err = s.show(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name = 'read_only'", func(_, value string) {
		if !strings.EqualFold(value, "OFF") && value != "0" {
			st.readOnly = value
		}
	})
	return st, err
}

// show runs a SHOW statement of name, value rows and hands each to row.
func (s *Store) show(ctx context.Context, query string, row func(name, value string)) error {
	rows, err := s.SQL().QueryContext(ctx, query)
	if err != nil {
		return mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return mapErr(err)
		}
		row(name, value)
	}
	return mapErr(rows.Err())
}

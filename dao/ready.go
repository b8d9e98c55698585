package dao

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// readyTTL is how long a Galera node's state, once read, answers Ready: a
// load balancer may ask every instance several times a second, and a
// node's state changes over seconds (a node cut off is non-Primary within
// evs.suspect_timeout), so one read a second is enough.
const readyTTL = time.Second

// Galera's wsrep_local_state when the node is in step with the cluster.
const galeraSynced = "4"

// readiness caches the last Galera state Ready read.
type readiness struct {
	mu    sync.Mutex
	at    time.Time
	state galeraState
}

// galeraState is what SHOW GLOBAL STATUS says of a node's replication.
type galeraState struct {
	galera  bool   // a wsrep provider is loaded (wsrep_provider_name set)
	ready   bool   // wsrep_ready
	local   string // wsrep_local_state: 4 is Synced
	comment string // wsrep_local_state_comment, for the log
}

func (g galeraState) err() error {
	if !g.galera || (g.ready && g.local == galeraSynced) {
		return nil
	}
	return fmt.Errorf("%w: Galera node is %s (wsrep_local_state %s, wsrep_ready %v)", errUnavailable, g.comment, g.local, g.ready)
}

// Ready reports whether this store's database can serve requests now. It
// pings the server every time, and on MySQL or MariaDB also asks whether
// the server is a Galera node and, if so, whether it is Synced and ready
// (that answer is kept for readyTTL). A ping is not enough there: a node
// that is joining or cut off from the Primary component answers a ping
// but refuses every query with 1047.
//
// Only Synced is ready. A Donor serves in principle, but with the rsync
// state transfer it holds a global read lock for the whole copy, so every
// commit on it would wait to its deadline; a Desynced node (wsrep_desync,
// a backup) lags the cluster, and reads on it may be stale. Plain MySQL,
// MariaDB without Galera and SQLite are ready when they answer the ping.
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
	st, err := s.galeraState(ctx)
	if err != nil {
		return err
	}
	s.ready.at, s.ready.state = time.Now(), st
	return st.err()
}

// galeraState reads the node's wsrep status. A server without Galera has
// no such rows (MySQL) or an empty provider name (MariaDB). SHOW STATUS
// is answered by a node that refuses queries, so it is what tells.
func (s *Store) galeraState(ctx context.Context) (galeraState, error) {
	rows, err := s.SQL().QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('wsrep_provider_name', 'wsrep_ready', 'wsrep_local_state', 'wsrep_local_state_comment')")
	if err != nil {
		return galeraState{}, mapErr(err)
	}
	defer rows.Close()
	var st galeraState
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return galeraState{}, mapErr(err)
		}
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
	}
	return st, mapErr(rows.Err())
}

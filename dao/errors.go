package dao

import (
	"database/sql/driver"
	"errors"
	"net"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"

	"paynotify/model"
)

var (
	errRetryable   = model.ErrRetryable
	errUnavailable = model.ErrUnavailable
	driverBadConn  = driver.ErrBadConn
)

// MySQL and SQLite error numbers that mean "run the transaction again".
const (
	mysqlLockWaitTimeout = 1205
	mysqlDeadlock        = 1213
	mysqlLockNoWait      = 3572 // MySQL 8's NOWAIT; MariaDB answers 1205
	sqliteBusy           = 5
	sqliteLocked         = 6
)

// unavailableErrors are the server's answers that say it cannot serve
// now, whatever the statement: the database is unavailable (Alipay is
// answered "failure" and resends; an API client gets 503), not an
// internal error.
var unavailableErrors = map[uint16]bool{
	// Galera: the node is joining, or cut off from the Primary component
	// ("WSREP has not yet prepared node for application use").
	1047: true,
	1040: true, // too many connections
	1053: true, // server shutdown in progress
	1290: true, // --read-only (a replica, or a primary being switched over)
	1836: true, // read-only mode
	1927: true, // MariaDB: connection was killed (a shutdown, a failover tool)
}

func isMapped(err error) bool {
	for _, e := range []error{model.ErrRetryable, model.ErrUnavailable, model.ErrOrderNotFound,
		model.ErrPaymentNotFound, model.ErrTradeConflict, model.ErrStateChanged} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// MySQL's answers to a value its ASCII identifier columns cannot hold
// (a non-ASCII order_sn, say): "Illegal mix of collations" for two, three
// or more operands.
const (
	mysqlIllegalMix2 = 1267
	mysqlIllegalMix3 = 1270
	mysqlIllegalMixN = 1271
)

// matchesNothing: the statement compared an identifier column with a value
// no row can hold. The handler's edge refuses such values (model.ValidID);
// this keeps any other caller's lookup a "not found", never a database
// error. SQLite simply finds nothing.
func matchesNothing(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == mysqlIllegalMix2 || me.Number == mysqlIllegalMix3 || me.Number == mysqlIllegalMixN)
}

func isRetryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysqlDeadlock || me.Number == mysqlLockWaitTimeout || me.Number == mysqlLockNoWait
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff // extended codes keep the primary code in the low byte
		return code == sqliteBusy || code == sqliteLocked
	}
	return false
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

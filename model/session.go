package model

import (
	"errors"
	"time"
)

// Session is a signed-in console operator. The browser holds a random
// token; only its SHA-256 (TokenHash) is stored.
type Session struct {
	TokenHash string
	Operator  string
	// CSRFToken must come back with every form that changes something.
	CSRFToken string
	// TimeZone is the IANA zone the operator reads times in.
	TimeZone   string
	ExpiresAt  time.Time
	CreateTime time.Time
}

// ErrNoSession: no unexpired session has that token.
var ErrNoSession = errors.New("no such session")

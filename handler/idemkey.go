package handler

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/service"
)

// IdempotencyKeys serves POST /api/v1/idempotency-keys: a key for a client
// that cannot make its own (a plain HTML form, a mini-program page).
type IdempotencyKeys struct {
	keys *service.IdempotencyKeys
}

// Issue answers 201 with a new key, bound to the member and expiring.
func (k *IdempotencyKeys) Issue(c *gin.Context) {
	key, exp, err := k.keys.Issue(member(c))
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, gin.H{"idempotency_key": key, "expires_at": exp.UTC()})
}

// checkIssuedKey refuses, before the route runs, an issued Idempotency-Key
// that is another member's or has expired (400 invalid_request); a key of
// the client's own goes on as it is.
func checkIssuedKey(keys *service.IdempotencyKeys) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := keys.Check(member(c), c.GetHeader("Idempotency-Key")); err != nil {
			apiError(c, err)
			return
		}
		c.Next()
	}
}

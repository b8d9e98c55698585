package handler

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
)

const memberKey = "paynotify.member"

// memberAuth admits requests bearing an HS256 token signed with secret,
// with an expiry, whose `sub` is a member id.
func memberAuth(secret []byte) gin.HandlerFunc {
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second))
	keyFunc := func(*jwt.Token) (any, error) { return secret, nil }
	return func(c *gin.Context) {
		raw, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !ok {
			writeAPIError(c, http.StatusUnauthorized, "unauthorized", "an Authorization: Bearer token is required")
			return
		}
		var claims jwt.RegisteredClaims
		if _, err := parser.ParseWithClaims(strings.TrimSpace(raw), &claims, keyFunc); err != nil {
			writeAPIError(c, http.StatusUnauthorized, "unauthorized", "invalid token")
			return
		}
		id, err := strconv.ParseInt(claims.Subject, 10, 64)
		if err != nil || id <= 0 {
			writeAPIError(c, http.StatusUnauthorized, "unauthorized", "token subject is not a member id")
			return
		}
		c.Set(memberKey, id)
		c.Next()
	}
}

// member is the authenticated member's id.
func member(c *gin.Context) int64 { return c.GetInt64(memberKey) }

// MemberToken signs a token for a member, valid for ttl: for `dev` and
// tests; production tokens come from the member service.
func MemberToken(secret []byte, memberID int64, ttl time.Duration) (string, error) {
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   fmt.Sprint(memberID),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	return t.SignedString(secret)
}

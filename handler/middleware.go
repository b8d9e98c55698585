package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/gin-gonic/gin"
)

const (
	requestIDHeader = "X-Request-Id"
	loggerKey       = "paynotify.logger"
	logAttrsKey     = "paynotify.logattrs"
)

// validRequestID accepts a caller's id only if it is short and printable,
// so a header cannot forge log lines.
var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestID gives every request an id (the caller's X-Request-Id if sane),
// echoes it, and logs the request once it is answered.
func requestID(base *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(requestIDHeader)
		if !validRequestID.MatchString(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Header(requestIDHeader, id)
		log := base.With("request_id", id)
		c.Set(loggerKey, log)
		start := time.Now()
		c.Next()
		// The path only: a query string is the caller's, not ours to log.
		attrs := []any{"method", c.Request.Method, "path", c.Request.URL.Path,
			"status", c.Writer.Status(), "duration_ms", time.Since(start).Milliseconds()}
		if extra, ok := c.Get(logAttrsKey); ok {
			attrs = append(attrs, extra.([]any)...)
		}
		log.Info("http", attrs...)
	}
}

// logAlso adds attributes to the request's one access-log line, so a
// handler's outcome costs no line of its own.
func logAlso(c *gin.Context, attrs ...any) {
	if prev, ok := c.Get(logAttrsKey); ok {
		attrs = append(prev.([]any), attrs...)
	}
	c.Set(logAttrsKey, attrs)
}

// logger is the request's logger, carrying its id.
func logger(c *gin.Context) *slog.Logger {
	if l, ok := c.Get(loggerKey); ok {
		return l.(*slog.Logger)
	}
	return slog.Default()
}

// recovery turns a panic into a 500 and one log line.
func recovery() gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		logger(c).Error("panic", "panic", rec)
		c.AbortWithStatus(http.StatusInternalServerError)
	})
}

// deadline bounds everything a request does by d: every database wait,
// COMMIT included, ends with the request's context, so past d the client
// is answered 503 instead of left waiting.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

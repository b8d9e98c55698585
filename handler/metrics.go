package handler

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/metrics"
)

// routeUnmatched is the route label of a request no route matched: the
// raw path would give every scanner's probe a series of its own.
const routeUnmatched = "unmatched"

// countRequests counts every request by its route's template (gin's
// FullPath, "/api/v1/orders/:sn" — never the path itself), method and
// status, and times it. It runs outside recovery, so a panic counts as
// the 500 it became.
func countRequests(m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = routeUnmatched
		}
		method := knownMethod(c.Request.Method)
		m.Requested(route, method, strconv.Itoa(c.Writer.Status()), time.Since(start))
	}
}

// knownMethod keeps the method label to the methods HTTP defines: a
// client can send any token there.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

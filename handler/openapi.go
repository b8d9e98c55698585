package handler

import (
	_ "embed" // the OpenAPI document is part of the binary
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPISpec is the OpenAPI 3 document of /api/v1 and /admin. The
// handler tests check every request and answer against it, and every
// route of New must be in it.
//
//go:embed openapi.yaml
var openAPISpec []byte

// serveOpenAPI handles GET /openapi.yaml: the document, as it is.
func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", openAPISpec)
}

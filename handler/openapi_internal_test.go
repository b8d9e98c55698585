package handler

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"paynotify/model"
)

// The error body's code enum in the OpenAPI document is exactly the codes
// the service can answer: every row of the error table, each provider's
// code of a payment provider's error, and the four written outside it.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	schema := doc.Components.Schemas["Error"]
	if schema == nil {
		t.Fatal("openapi.yaml has no Error schema")
	}
	var described []string
	for _, v := range schema.Value.Properties["error"].Value.Properties["code"].Value.Enum {
		described = append(described, v.(string))
	}
	answered := []string{"unauthorized", internalRow.code, codeNotFound, codeMethodNotAllowed}
	for _, r := range errorTable {
		answered = append(answered, r.code)
		for _, p := range model.Providers() {
			if code, _, ok := providerAnswer(r, &model.ProviderError{Provider: p, Err: r.err}); ok {
				answered = append(answered, code)
			}
		}
	}
	slices.Sort(described)
	slices.Sort(answered)
	described, answered = slices.Compact(described), slices.Compact(answered)
	if !slices.Equal(described, answered) {
		t.Fatalf("Error.code enum in openapi.yaml is\n%q\nthe service answers\n%q", described, answered)
	}
}

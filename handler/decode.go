package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// decodeJSON reads a bounded JSON body: one object, no unknown fields, no
// name twice in any object.
func decodeJSON(c *gin.Context, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxOrderBody))
	if err != nil {
		return bodyError(err)
	}
	if err := uniqueNames(body); err != nil {
		return fmt.Errorf("%w: body: %v", model.ErrInvalidRequest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %v", model.ErrInvalidRequest, err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return fmt.Errorf("%w: body: one JSON object expected", model.ErrInvalidRequest)
	}
	return nil
}

// uniqueNames refuses a document in which an object names a member twice.
// encoding/json would silently keep the last, and it matches names without
// regard to case, so "amount" and "Amount" are the same name here too.
func uniqueNames(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	// One frame per open object or array: the names seen in an object
	// (nil for an array), and whether the next token is a name.
	type frame struct {
		names  map[string]bool
		isName bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // the decoder that follows says what is wrong
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].names != nil && stack[top].isName {
			if name, ok := tok.(string); ok {
				key := strings.ToLower(name)
				if stack[top].names[key] {
					return fmt.Errorf("member %q appears twice", name)
				}
				stack[top].names[key] = true
				stack[top].isName = false
				continue
			}
		}
		if top >= 0 && stack[top].names != nil {
			stack[top].isName = true // a value was read: a name comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{names: map[string]bool{}, isName: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if top := len(stack) - 1; top >= 0 && stack[top].names != nil {
				stack[top].isName = true
			}
		}
	}
}

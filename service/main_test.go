package service_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"paynotify/service"
)

// TestMain runs the package's tests with the duplicate cache every
// Payments gets by default (service.DefaultDuplicateCacheSize), or with
// TEST_DUPLICATE_CACHE's size: 0 runs them all with it off. CI runs both.
func TestMain(m *testing.M) {
	if v := os.Getenv("TEST_DUPLICATE_CACHE"); v != "" {
		size, err := strconv.Atoi(v)
		if err != nil || size < 0 {
			fmt.Fprintf(os.Stderr, "TEST_DUPLICATE_CACHE=%q: want a size, 0 for off\n", v)
			os.Exit(2)
		}
		service.SetDefaultDuplicateCache(size)
	}
	os.Exit(m.Run())
}

package bill_test

import (
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
)

func encodeGBK(t *testing.T, s string) []byte {
	t.Helper()
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

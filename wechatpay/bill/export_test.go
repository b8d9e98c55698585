package bill

// SetMaxBillBytes lowers the cap on a decompressed bill until the
// returned function restores it.
func SetMaxBillBytes(n int64) (restore func()) {
	old := maxBillBytes
	maxBillBytes = n
	return func() { maxBillBytes = old }
}

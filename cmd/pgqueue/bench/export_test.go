package bench

// SetBeforeServerRead sets the hook BurnDownProcesses runs between the
// children's results and the read of their backends' CPU, until the test
// ends.
func SetBeforeServerRead(cleanup func(func()), hook func()) {
	beforeServerRead = hook
	cleanup(func() { beforeServerRead = nil })
}

// WindowStarts is windowStarts: the most starts in any window of period,
// and the starts in each whole period.
var WindowStarts = windowStarts

//go:build race

package sqlsink_test

const raceEnabled = true

//go:build race

package writer

const raceEnabled = true

//go:build !race

package writer

const raceEnabled = false

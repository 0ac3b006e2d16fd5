//go:build !race

package segment

const raceEnabled = false

package segment

// EpochPrefix is the start of the base name of every segment of one epoch
// (see Name.Base): the epoch, zero-padded, and the separator. Names sort by
// it, so a listing from past one epoch's names reaches the newer epochs'.
func EpochPrefix(epoch uint64) string {
	return string(appendPadded(nil, epoch)) + "-"
}

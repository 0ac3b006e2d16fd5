package meta

// checkMetaRules checks the rules of docs/FORMAT.md that a decoded meta
// object's body keeps beyond its field types; key names the object in
// errors, which match ErrCorrupt.
func checkMetaRules(key string, m *Meta) error {
	return nil
}

// checkStateRules is checkMetaRules for a writer state object.
func checkStateRules(key string, st *WriterState) error {
	return nil
}

package sqlsink

import (
	"slices"
	"testing"
)

func TestColumnRenames(t *testing.T) {
	for _, c := range []struct {
		q    string
		want [][2]string
	}{
		{"ALTER TABLE t RENAME COLUMN a TO b", [][2]string{{"a", "b"}}},
		{"ALTER TABLE `db`.`t` RENAME COLUMN `a``x` TO `b`;", [][2]string{{"a`x", "b"}}},
		{"alter table t change column a b INT NOT NULL, rename column c to d", [][2]string{{"a", "b"}, {"c", "d"}}},
		{"ALTER TABLE t CHANGE a b VARCHAR(8), ADD COLUMN e INT", [][2]string{{"a", "b"}}},
		{"ALTER ONLINE TABLE t RENAME COLUMN a TO b", [][2]string{{"a", "b"}}},
		{"ALTER TABLE t ADD COLUMN a INT", nil},
		{"ALTER TABLE t RENAME TO u, RENAME COLUMN a TO b", nil},
		{"ALTER TABLE t RENAME INDEX i TO j", nil},
		{"RENAME TABLE t TO u", nil},
		{"ALTER TABLE t RENAME COLUMN a", nil},
	} {
		got, ok := columnRenames(c.q)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.q, got, ok, c.want)
		}
	}
}

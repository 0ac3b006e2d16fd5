package sqlsink

import (
	"slices"
	"testing"
)

func TestAlterRenames(t *testing.T) {
	for _, c := range []struct {
		q         string
		want, idx [][2]string
	}{
		{"ALTER TABLE t RENAME COLUMN a TO b", [][2]string{{"a", "b"}}, nil},
		{"ALTER TABLE `db`.`t` RENAME COLUMN `a``x` TO `b`;", [][2]string{{"a`x", "b"}}, nil},
		{"alter table t change column a b INT NOT NULL, rename column c to d", [][2]string{{"a", "b"}, {"c", "d"}}, nil},
		{"ALTER TABLE t CHANGE a b VARCHAR(8), ADD COLUMN e INT", [][2]string{{"a", "b"}}, nil},
		{"ALTER ONLINE TABLE t RENAME COLUMN a TO b", [][2]string{{"a", "b"}}, nil},
		{"ALTER TABLE t ADD COLUMN a INT", nil, nil},
		{"ALTER TABLE t RENAME TO u, RENAME COLUMN a TO b", nil, nil},
		{"ALTER TABLE t RENAME INDEX i TO j", nil, [][2]string{{"i", "j"}}},
		{"ALTER TABLE t RENAME KEY `i` TO j, RENAME COLUMN a TO b", [][2]string{{"a", "b"}}, [][2]string{{"i", "j"}}},
		{"RENAME TABLE t TO u", nil, nil},
		{"ALTER TABLE t RENAME COLUMN a", nil, nil},
	} {
		got, idx, ok := alterRenames(c.q)
		if ok != (c.want != nil || c.idx != nil) || !slices.Equal(got, c.want) || !slices.Equal(idx, c.idx) {
			t.Errorf("%s: %v, %v, %v; want %v, %v", c.q, got, idx, ok, c.want, c.idx)
		}
	}
}

package mysql

import (
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	c, redacted, err := parseURI("mysql://u:p%40ss@db.example:3307/shop?timeout=5s&sql_mode=%27ANSI%27")
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "u" || c.Passwd != "p@ss" || c.Addr != "db.example:3307" || c.DBName != "shop" ||
		!c.InterpolateParams || c.Params["time_zone"] != "'+00:00'" || c.Params["sql_mode"] != "'ANSI'" || c.Timeout.Seconds() != 5 {
		t.Errorf("parsed %+v", c)
	}
	if strings.Contains(redacted, "p@ss") || strings.Contains(redacted, "p%40ss") {
		t.Errorf("redacted %q", redacted)
	}
	c, _, err = parseURI("mariadb://[::1]?interpolateParams=false&time_zone=%27%2B08%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "root" || c.Addr != "[::1]:3306" || c.DBName != "" || c.InterpolateParams || c.Params["time_zone"] != "'+08:00'" {
		t.Errorf("parsed %+v", c)
	}
	if _, _, err := parseURI("sqlite:///a.db"); err == nil {
		t.Error("the MySQL sink took a sqlite URI")
	}
}

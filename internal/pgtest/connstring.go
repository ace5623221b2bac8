package pgtest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// withDatabase returns connString with its database replaced by dbname. It
// accepts both forms libpq and pgx accept: a URL (postgres:// or
// postgresql://) and a keyword/value DSN. Everything else in the string is
// kept as written.
func withDatabase(connString, dbname string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		return urlWithDatabase(connString, dbname)
	}
	return dsnWithDatabase(connString, dbname)
}

func urlWithDatabase(connString, dbname string) (string, error) {
	u, err := url.Parse(connString)
	if err != nil {
		return "", fmt.Errorf("parse connection url: %w", err)
	}
	u.Path = "/" + dbname
	// Escape a slash in the name too, which Path alone would leave as is.
	u.RawPath = "/" + url.PathEscape(dbname)
	// A dbname query parameter would override the path, so it has to go.
	if q := u.Query(); q.Has("dbname") {
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

func dsnWithDatabase(connString, dbname string) (string, error) {
	pairs, err := splitDSN(connString)
	if err != nil {
		return "", err
	}
	setting := "dbname=" + quoteDSNValue(dbname)
	out := make([]string, 0, len(pairs)+1)
	replaced := false
	for _, p := range pairs {
		if p.key == "dbname" {
			if !replaced {
				out = append(out, setting)
				replaced = true
			}
			continue
		}
		out = append(out, p.text)
	}
	if !replaced {
		out = append(out, setting)
	}
	return strings.Join(out, " "), nil
}

// dsnPair is one keyword=value setting of a DSN; text is the setting as it
// was written, normalised to key=value without surrounding blanks.
type dsnPair struct {
	key  string
	text string
}

var errDSNSyntax = errors.New("invalid keyword/value connection string")

// splitDSN splits a keyword/value connection string following libpq's
// rules: blanks around '=' are allowed, a value is either single-quoted
// (with \' and \\ escapes) or runs to the next blank (with \ escaping the
// next byte).
func splitDSN(s string) ([]dsnPair, error) {
	var pairs []dsnPair
	i := 0
	skipSpace := func() {
		for i < len(s) && isDSNSpace(s[i]) {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(s) {
			return pairs, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && !isDSNSpace(s[i]) {
			i++
		}
		key := s[start:i]
		skipSpace()
		if i >= len(s) || s[i] != '=' || key == "" {
			return nil, fmt.Errorf("%w: missing \"=\" after %q", errDSNSyntax, key)
		}
		i++ // '='
		skipSpace()
		start = i
		if i < len(s) && s[i] == '\'' {
			i++ // opening quote
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("%w: unterminated quoted value for %q", errDSNSyntax, key)
			}
			i++ // closing quote
		} else {
			for i < len(s) && !isDSNSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		}
		i = min(i, len(s))
		pairs = append(pairs, dsnPair{key: key, text: key + "=" + s[start:i]})
	}
}

func isDSNSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v'
}

func quoteDSNValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

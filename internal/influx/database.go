package influx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	ihttp "github.com/influxdata/influxdb-client-go/v2/api/http"
)

// InfluxDB 1.8 serves the v2 write API on a database and retention policy: the bucket
// "qas/autogen" is database "qas", retention policy "autogen". A write into a
// database that does not exist gets 404 "database not found" (2.x says "bucket not
// found" instead), and nothing else creates the database for QAS: the in-cluster
// InfluxDB's image creates it only if its first start's init script succeeds. So the
// writer creates it, with CREATE DATABASE, which InfluxDB 1.x treats as a no-op when
// the database exists.

// errNotV1 means the server is not InfluxDB 1.x, whose InfluxQL the writer speaks.
var errNotV1 = errors.New("not InfluxDB 1.x")

// refusedError is InfluxDB answering CREATE DATABASE with an error (as opposed to not
// answering): asking again will not help.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// refused reports whether err means the database cannot be created by asking again.
func refused(err error) bool {
	var re *refusedError
	return errors.As(err, &re) || errors.Is(err, errNotV1)
}

// missingDatabase reports whether err is InfluxDB 1.x refusing a write because the
// database does not exist.
func missingDatabase(err error) bool {
	var he *ihttp.Error
	return errors.As(err, &he) && he.StatusCode == http.StatusNotFound &&
		strings.Contains(he.Message+" "+he.Code, "database not found")
}

// v1Database is the database a v2-API bucket names on InfluxDB 1.x ("db/rp" or "db").
func v1Database(bucket string) string {
	db, _, _ := strings.Cut(bucket, "/")
	return db
}

// quoteIdent quotes an InfluxQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// createDatabase creates the bucket's database on InfluxDB 1.x. It asks /ping for the
// server's version first (X-Influxdb-Version), so that it never sends InfluxQL to an
// InfluxDB 2.x. The token authenticates as on every 1.8 endpoint ("user:password");
// with authentication on, the user must be an admin.
func (w *Writer) createDatabase(ctx context.Context) (version string, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	version, err = w.serverVersion(ctx)
	if err != nil {
		return "", err
	}
	if !maybeV1(version) {
		return version, fmt.Errorf("InfluxDB %s: %w", version, errNotV1)
	}
	q := "CREATE DATABASE " + quoteIdent(v1Database(w.cfg.Bucket))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(w.cfg.URL, "/")+"/query",
		strings.NewReader(url.Values{"q": {q}}.Encode()))
	if err != nil {
		return version, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w.authorize(req)
	resp, err := w.http.Do(req)
	if err != nil {
		return version, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	// Errors come as {"error": ...} with a 4xx/5xx status, or per statement as
	// {"results": [{"error": ...}]} with 200.
	var out struct {
		Error   string `json:"error"`
		Results []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	_ = json.Unmarshal(body, &out)
	msg := out.Error
	for _, r := range out.Results {
		if r.Error != "" {
			msg = r.Error
		}
	}
	switch {
	case resp.StatusCode >= 500 && msg == "":
		return version, fmt.Errorf("%s: %s", q, resp.Status) // overloaded: ask again later
	case resp.StatusCode != http.StatusOK && msg == "":
		return version, &refusedError{fmt.Sprintf("%s: %s", q, resp.Status)}
	case msg != "":
		return version, &refusedError{fmt.Sprintf("%s: %s (%s)", q, msg, resp.Status)}
	}
	return version, nil
}

// maybeV1 reports whether a /ping version may be InfluxDB 1.x: anything but a 2.x or
// later version ("2.7.4", "v2.7.4"), since builds without a version say "unknown".
func maybeV1(version string) bool {
	v := strings.TrimPrefix(version, "v")
	return v == "" || v[0] < '2' || v[0] > '9'
}

// serverVersion returns the X-Influxdb-Version header of /ping ("" when absent).
func (w *Writer) serverVersion(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(w.cfg.URL, "/")+"/ping", nil)
	if err != nil {
		return "", err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("X-Influxdb-Version"), nil
}

func (w *Writer) authorize(req *http.Request) {
	if w.cfg.Token != "" {
		req.Header.Set("Authorization", "Token "+w.cfg.Token)
	}
}

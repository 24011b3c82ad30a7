package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/axsched/ax/store"
)

// query builds a statement with literal values: integers in decimal, strings and bytes
// as hex literals (X'…'), which are exact for any bytes and in any sql_mode. Nothing
// else is ever written into a statement, so there is nothing to escape.
type query struct{ b []byte }

func newQuery(size int) *query { return &query{b: make([]byte, 0, size)} }

func (q *query) raw(s string) *query { q.b = append(q.b, s...); return q }

func (q *query) int(n int64) *query { q.b = strconv.AppendInt(q.b, n, 10); return q }

func (q *query) uint(n uint64) *query { q.b = strconv.AppendUint(q.b, n, 10); return q }

const hexDigits = "0123456789ABCDEF"

func (q *query) hexString(s string) *query {
	q.b = append(q.b, "X'"...)
	for i := 0; i < len(s); i++ {
		q.b = append(q.b, hexDigits[s[i]>>4], hexDigits[s[i]&15])
	}
	q.b = append(q.b, '\'')
	return q
}

func (q *query) hexBytes(p []byte) *query {
	q.b = append(q.b, "X'"...)
	q.b = append(hex.AppendEncode(q.b, p), '\'')
	return q
}

func (q *query) Len() int { return len(q.b) }

// String returns the statement without copying it, as strings.Builder does: q must not be
// written to afterwards.
func (q *query) String() string { return unsafe.String(unsafe.SliceData(q.b), len(q.b)) }

// hexList writes "(X'…',X'…')" for strs.
func (q *query) hexList(strs []string) *query {
	q.raw("(")
	for i, s := range strs {
		if i > 0 {
			q.raw(",")
		}
		q.hexString(s)
	}
	return q.raw(")")
}

// Stored codes of store.State and store.Priority: this package's own, so that the
// table does not depend on the kernel's numbering. Never renumber them. Live states are
// the codes 1 to 4, so "state <= 4" selects them.
func stateCode(s store.State) uint8 {
	switch s {
	case store.Delayed:
		return 1
	case store.Queued:
		return 2
	case store.Running:
		return 3
	case store.Retrying:
		return 4
	case store.Succeeded:
		return 5
	case store.Failed:
		return 6
	case store.TimedOut:
		return 7
	case store.Canceled:
		return 8
	case store.Evicted:
		return 9
	case store.Abandoned:
		return 10
	}
	panic("mysqlstore: no code for state " + s.String()) // Validate let it through: a bug
}

var codeStates = [...]store.State{
	0, store.Delayed, store.Queued, store.Running, store.Retrying,
	store.Succeeded, store.Failed, store.TimedOut, store.Canceled, store.Evicted, store.Abandoned,
}

func decodeState(code uint8) (store.State, error) {
	if code == 0 || int(code) >= len(codeStates) {
		return 0, fmt.Errorf("mysqlstore: unknown state code %d in the table", code)
	}
	return codeStates[code], nil
}

// Dead letters and completed tasks, as SQL lists of codes.
var (
	deadLetterCodes = codeList(store.Failed, store.TimedOut, store.Evicted, store.Abandoned)
	completedCodes  = codeList(store.Succeeded, store.Canceled)
	liveMaxCode     = strconv.Itoa(int(stateCode(store.Retrying)))
	// liveCodes lists the live codes: "state IN liveCodes AND owner IN (…)" is a few
	// point ranges of the index (state, owner, …), where a range of state is not.
	liveCodes = codeList(store.Delayed, store.Queued, store.Running, store.Retrying)
	// waitingCodes lists the live codes but Running: the states a pool task is claimed from.
	waitingCodes = codeList(store.Delayed, store.Queued, store.Retrying)
	// priorityCodes lists every priority's code: "priority IN priorityCodes AND run_at
	// < …" bounds a range of the index (state, owner, priority, run_at) per priority.
	priorityCodes = "(" + strconv.Itoa(int(priorityCode(store.High))) + "," + strconv.Itoa(int(priorityCode(store.Normal))) + "," +
		strconv.Itoa(int(priorityCode(store.Low))) + ")"
)

func codeList(states ...store.State) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = strconv.Itoa(int(stateCode(s)))
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// priorityCode orders priorities: High 1, Normal 2, Low 3.
func priorityCode(p store.Priority) uint8 {
	switch p {
	case store.High:
		return 1
	case store.Low:
		return 3
	default:
		return 2
	}
}

func decodePriority(code uint8) (store.Priority, error) {
	switch code {
	case 1:
		return store.High, nil
	case 2:
		return store.Normal, nil
	case 3:
		return store.Low, nil
	}
	return 0, fmt.Errorf("mysqlstore: unknown priority code %d in the table", code)
}

// millis is t in milliseconds since the Unix epoch; the zero time is stored as the zero
// time's milliseconds, and comes back as the zero time.
func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// untilMillis stores a time that may be zero (none): 0 for the zero time.
func untilMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return millis(t)
}

// fromUntil reads what untilMillis stored.
func fromUntil(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return fromMillis(ms)
}

func compareStrings(a, b string) int { return strings.Compare(a, b) }

// scanner is what a row callback scans from.
type scanner interface{ Scan(dest ...any) error }

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanAll runs query on db and calls f for each row.
func scanAll(ctx context.Context, db queryer, query string, f func(scanner) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close() //nolint:errcheck // rows.Err reports what matters
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanTask reads the columns of columns into a task.
func scanTask(sc scanner) (store.StoredTask, error) { return scanTaskWith(sc) }

// scanTaskWith is scanTask of a row whose task columns are followed by more, scanned
// into extra.
func scanTaskWith(sc scanner, extra ...any) (store.StoredTask, error) {
	var (
		t                          store.StoredTask
		prio, state                uint8
		runAt, timeout, created, u int64
		until, window              int64
		headers                    []byte
	)
	err := sc.Scan(append([]any{
		&t.ID, &t.Kind, &t.Payload, &prio, &runAt, &timeout, &t.MaxAttempts, &t.Attempt,
		&t.Fence, &t.UniqueKey, &state, &t.LastError, &created, &u, &t.Group, &t.Key, &until, &window, &headers,
	}, extra...)...)
	if err != nil {
		return t, err
	}
	if len(headers) > 0 {
		if t.Headers, err = decodeHeaders(headers); err != nil {
			return t, fmt.Errorf("mysqlstore: task %q: headers: %w", t.ID, err)
		}
	}
	if t.Priority, err = decodePriority(prio); err != nil {
		return t, err
	}
	if t.State, err = decodeState(state); err != nil {
		return t, err
	}
	t.RunAt, t.Timeout, t.CreatedAt, t.UpdatedAt = fromMillis(runAt), time.Duration(timeout), fromMillis(created), fromMillis(u)
	t.UniqueUntil, t.UniqueFor = fromUntil(until), time.Duration(window)*time.Millisecond
	return t, nil
}

// encodeHeaders encodes h for the headers column: each pair, by key, as its key and
// its value, each a uvarint length then its bytes (any bytes, UTF-8 or not).
func encodeHeaders(h map[string]string) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(h)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(h[k])))
		b = append(b, h[k]...)
	}
	return b
}

// decodeHeaders decodes what encodeHeaders encoded.
func decodeHeaders(b []byte) (map[string]string, error) {
	h := map[string]string{}
	next := func() (string, error) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", errors.New("malformed")
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, nil
	}
	for len(b) > 0 {
		k, err := next()
		if err != nil {
			return nil, err
		}
		v, err := next()
		if err != nil {
			return nil, err
		}
		h[k] = v
	}
	return h, nil
}

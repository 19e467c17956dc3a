package servertest

import "testing"

// Scenario is one row of a table-driven HTTP test: a request and what its
// answer must be.
type Scenario struct {
	Name        string
	Method      string
	Path        string
	Token       string
	Body        any // as Req.Body
	ContentType string
	Header      map[string]string

	WantStatus int
	// WantCode is the problem's code; empty, the answer is not a problem
	// and only its status is checked.
	WantCode string
	// WantField is the problem's field member; empty, it is not checked.
	WantField string
}

// Req is the scenario's request.
func (sc Scenario) Req() Req {
	return Req{Method: sc.Method, Path: sc.Path, Token: sc.Token, Body: sc.Body,
		ContentType: sc.ContentType, Header: sc.Header}
}

// Check fails the test unless r is the answer the scenario wants: the
// status, and when WantCode is set a complete problem body (WantProblem)
// with that code and, when WantField is set, that field. It returns the
// problem's members, or nil when the answer is not a problem.
func (sc Scenario) Check(tb testing.TB, r *Response) map[string]any {
	tb.Helper()
	if sc.WantCode == "" {
		r.WantStatus(tb, sc.WantStatus)
		return nil
	}
	p := r.WantProblem(tb, sc.WantStatus, sc.WantCode)
	if sc.WantField != "" && p["field"] != sc.WantField {
		tb.Fatalf("problem field: got %v, want %s; body %s", p["field"], sc.WantField, r.Body)
	}
	return p
}

// Test sends the scenario's request with c and checks the answer; it
// returns the answer for the checks a table adds.
func (sc Scenario) Test(tb testing.TB, c Client) *Response {
	tb.Helper()
	r := c.Do(tb, sc.Req())
	sc.Check(tb, r)
	return r
}

// RunScenarios runs each scenario as a subtest named by its Name.
func RunScenarios(t *testing.T, c Client, scenarios []Scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, c) })
	}
}

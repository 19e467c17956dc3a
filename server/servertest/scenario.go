package servertest

import "testing"

// Scenario is one row of a table-driven HTTP test: a request and what its
// answer must be, with the hooks pocketbase's ApiScenario has around them.
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

	// Setup, when set, runs before the request and completes the scenario
	// with what exists only then (an account in a given state, a fresh
	// challenge, a ceremony in flight); what it begins it undoes with
	// tb.Cleanup, which runs however the row ends.
	Setup func(tb testing.TB, sc *Scenario)
	// Teardown, when set, runs once the answer passed the checks, with the
	// scenario as sent and its answer: the checks a row adds (headers, the
	// body, what the request changed or left alone).
	Teardown func(tb testing.TB, sc Scenario, r *Response)
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

// Test runs Setup, sends the scenario's request with c, checks the answer
// and runs Teardown; it returns the answer.
func (sc Scenario) Test(tb testing.TB, c Client) *Response {
	tb.Helper()
	if sc.Setup != nil {
		sc.Setup(tb, &sc)
	}
	r := c.Do(tb, sc.Req())
	sc.Check(tb, r)
	if sc.Teardown != nil {
		sc.Teardown(tb, sc, r)
	}
	return r
}

// RunScenarios runs each scenario as a subtest named by its Name.
func RunScenarios(t *testing.T, c Client, scenarios []Scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, c) })
	}
}

package a2aserver

import (
	"context"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// CardInfo is what Baton's agent card says about it.
type CardInfo struct {
	// Name is a2a_server.name.
	Name string
	// Description is a2a_server.description; empty: derived from Skills.
	Description string
	// Version is Baton's version.
	Version string
	// Skills are the configured agents and tool servers, one skill each.
	Skills []Skill
	// Bearer says that the server requires a bearer token (server.auth_tokens_env): the
	// card then declares the bearer scheme and requires it.
	Bearer bool
}

// Skill is one skill of the card.
type Skill struct {
	ID, Name, Description string
}

// bearerScheme is the name of the card's bearer security scheme.
const bearerScheme a2a.SecuritySchemeName = "bearer"

// capabilities are what the card declares. Push notifications are off: a2asrv's sender
// posts synchronously inside the task's event loop, without retries or persistence, which
// would need code of our own to make dependable (README, design/a2a-server.md).
func capabilities() a2a.AgentCapabilities {
	return a2a.AgentCapabilities{Streaming: true, PushNotifications: false}
}

// card produces the agent card for the base URL the request was addressed to.
func (s *Server) card(ctx context.Context) (*a2a.AgentCard, error) {
	base, _ := ctx.Value(baseKey{}).(string)
	info := s.cfg.Card
	c := &a2a.AgentCard{
		Name:        info.Name,
		Description: describe(info),
		Version:     orDefault(info.Version, "dev"),
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base+PathJSONRPC, a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(base+PathREST, a2a.TransportProtocolHTTPJSON),
			{URL: base + PathJSONRPCv03, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
			{URL: base + PathRESTv03, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       capabilities(),
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
	}
	for _, sk := range info.Skills {
		c.Skills = append(c.Skills, a2a.AgentSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: []string{"baton"}})
	}
	if len(c.Skills) == 0 {
		// A card has at least one skill: Baton itself answers with its model.
		c.Skills = []a2a.AgentSkill{{ID: "coordinate", Name: "coordinate", Description: "Answers with its language model.", Tags: []string{"baton"}}}
	}
	if info.Bearer {
		c.SecuritySchemes = a2a.NamedSecuritySchemes{bearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "A token of server.auth_tokens_env."}}
		c.SecurityRequirements = a2a.SecurityRequirementsOptions{{bearerScheme: a2a.SecuritySchemeScopes{}}}
	}
	return c, nil
}

// describe is the card's description: the configured one, or one derived from the skills.
func describe(info CardInfo) string {
	if d := strings.TrimSpace(info.Description); d != "" {
		return d
	}
	if len(info.Skills) == 0 {
		return "Baton coordinator."
	}
	names := make([]string, 0, len(info.Skills))
	for _, sk := range info.Skills {
		names = append(names, sk.Name)
	}
	return "Baton coordinator delegating to: " + strings.Join(names, ", ") + "."
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

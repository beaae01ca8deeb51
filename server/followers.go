package server

// DefaultMaxFollowersPerRun is Config.MaxFollowersPerRun's default.
const DefaultMaxFollowersPerRun = 100

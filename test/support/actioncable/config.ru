# A one-file ActionCable server (Rails' actioncable gem, no Rails app) for kas's broadcasts: its
# Redis subscription adapter on REDIS_URL (with CHANNEL_PREFIX as cable.yml's channel_prefix), and a
# channel that streams an agent's broadcasting as GitLab's would. Run with puma; see
# test/support/actioncable-server.ts.
require "action_cable"
require "logger"

module ApplicationCable
  class Connection < ActionCable::Connection::Base; end
end

class ClusterAgentChannel < ActionCable::Channel::Base
  def subscribed
    stream_from "cluster_agent:#{params[:agent_id]}"
  end
end

$stdout.sync = true
ActionCable.server.config.cable = {
  adapter: "redis",
  url: ENV.fetch("REDIS_URL"),
  channel_prefix: ENV["CHANNEL_PREFIX"],
}.compact
ActionCable.server.config.connection_class = -> { ApplicationCable::Connection }
ActionCable.server.config.disable_request_forgery_protection = true
ActionCable.server.config.logger = Logger.new($stdout)

run ActionCable.server

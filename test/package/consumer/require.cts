// A CommonJS consumer: require() of the package (an ES module), as Node.js >= 20.19 and >= 22.12
// allow, type-checked by TypeScript >= 5.8 under `module: nodenext`.
import tunnel = require("gitlab-agent-tunnel");
import router = require("gitlab-agent-tunnel/router");

console.log(
  `require: ${typeof tunnel.serveTunnels} ${typeof router.Router} ${tunnel.Kind[tunnel.Kind.KIND_HTTP]}`,
);

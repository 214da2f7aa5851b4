// Renders /api-docs/openapi.json with the vendored Swagger UI. Everything is served by this
// service: no CDN, and validatorUrl is off so the page never calls validator.swagger.io.
"use strict";
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  if (!root || typeof window.SwaggerUIBundle !== "function") {
    return; // the server-rendered summary stays visible
  }
  window.ui = window.SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    deepLinking: true,
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});

"""The sans-IO connections: a request and response travel through both ends unchanged."""

from groupstream.protocol.connection import ClientConnection, Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.messages import APIS
from groupstream.protocol.primitives import I16, I32

API_VERSIONS = APIS[18]


def test_api_versions_round_trip_at_every_version():
    for version in API_VERSIONS.api.versions():
        server = ServerConnection(APIS)
        client = ClientConnection(APIS, client_id="test-client")
        req = API_VERSIONS.Request(client_software_name="gs", client_software_version="1") if version >= 3 else API_VERSIONS.Request()
        corr, wire = client.send_request(API_VERSIONS, version, req)
        server.receive_data(wire)
        event = server.next_event()
        assert isinstance(event, Request)
        assert event.header.correlation_id == corr
        assert event.header.client_id == "test-client"
        assert event.body == req
        resp = API_VERSIONS.Response(api_keys=[API_VERSIONS.Response.ApiVersion(18, 0, 4)], throttle_time_ms=0)
        client.receive_data(b"".join(server.encode_response(API_VERSIONS, version, corr, resp)))
        got_corr, api, got_version, body = client.next_response()
        assert (got_corr, api, got_version) == (corr, API_VERSIONS, version)
        assert body.api_keys == resp.api_keys
        assert client.in_flight == 0


def test_unknown_api_and_version_surface_as_unsupported_with_their_correlation_id():
    server = ServerConnection(APIS)
    header = I16.pack(18) + I16.pack(99) + I32.pack(1234) + I16.pack(-1)
    server.receive_data(I32.pack(len(header)) + header)
    assert server.next_event() == UnsupportedRequest(18, 99, 1234)
    header = I16.pack(9999) + I16.pack(0) + I32.pack(7) + I16.pack(-1)
    server.receive_data(I32.pack(len(header)) + header)
    assert server.next_event() == UnsupportedRequest(9999, 0, 7)

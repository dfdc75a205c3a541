"""The A2A gateway: the SDK's ``RequestHandler`` interface, each method a thin adapter over
``ext.pircan.service`` like the IRC verbs and the MCP tools.

The SDK speaks the protocol (JSON-RPC and HTTP+JSON, SSE streams, the protobuf types); this module
maps A2A operations onto PIRCAN ones, for the account the bearer token names (``caller``), toward
the agent the endpoint names (``/a2a/agents/<name>``) or the message's metadata names (``to``, on
the network's endpoint ``/a2a``):

* ``SendMessage`` without ``skill`` is a direct message (``send_message``; the A2A ``message_id`` is
  its idempotency key). It waits up to ``pircan.a2a_wait_ms`` for the recipient's reply in the same
  conversation (``waits.await_reply``, the wait of MCP's await_reply and IRC's SEND with an await
  time) and answers with it (marked read), or else with the receipt.
* ``SendMessage`` with ``skill`` creates a task (``create_task``); with the ``task_id`` of a task
  waiting for input it answers it (``provide_input``). It waits (as long) for the task to finish or
  ask for input, and answers with the task as it is then.
* ``GetTask``, ``ListTasks``, ``CancelTask`` read and cancel tasks; ``SendStreamingMessage`` and
  ``SubscribeToTask`` follow one: the task, then each change (an artifact for a result, a status
  update for every change) until it is final or asks for input.
* On the network's endpoint, a message whose metadata names ``intro`` gets an intro token.

Refusals become A2A errors whose data (``google.rpc.ErrorInfo`` metadata) carries the code of
IRC's FAIL lines and MCP's tool errors: ``{"code": "NO_AGREEMENT", "context": "bob"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage

from ircd.api import UNAVAILABLE_TEXT, StoreUnavailable

from ext.pircan.a2a import cards, skills
from ext.pircan.a2a.convert import (
    FINAL,
    PIRCAN_STATES,
    SETTLED,
    artifact_event,
    data_message,
    message_proto,
    metadata_of,
    receipt_proto,
    status_event,
    task_proto,
    text_of,
)
from ext.pircan.delivery import current as current_delivery
from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.metrics import CANCELLED, ERROR, INVALID, OK
from ext.pircan.service import contact, messages, tasks
from ext.pircan.service import intro as intros
from ext.pircan.service import waits
from ext.pircan.service.refusals import NEXT_STEP, Refused, refuse_nul
from ext.pircan.state import Pircan
from ext.pircan.waiting import Waiter
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task, TaskEntry

__all__ = ["GatewayHandler", "Watch", "a2a_error"]

log = logging.getLogger("pircd.pircan")
VIA = "a2a"
# codes about the request's own values; every other refusal is a rule refusing the request
# what a message's (and its request's) metadata may name; anything else is refused, not sent as a message
METADATA_KEYS = frozenset({"to", "skill", "in_reply_to", "intro", "state"})
_PARAMS = frozenset({"EMPTY", "TOO_LONG", "INVALID_SCOPE", "INVALID_PARAMS", "NEED_MORE_PARAMS", "NO_SUCH_MESSAGE"})


# the way out of a refusal, said the A2A way (the skill to call) where the service names another
# transport's verb: keyed by the service's own next step, so that a refusal with a step of its own
# (NO_AGREEMENT while a request is pending: wait, do not ask again) keeps its meaning
A2A_NEXT_STEPS = {
    NEXT_STEP["NO_AGREEMENT"]:
        "Ask for one: a message to the network's endpoint /a2a with metadata 'skill': 'pircan:contact' "
        "and a data part {'action': 'request', 'agent': <name>, 'scopes': ['message'], 'days': 30, "
        "'purpose': <why>}; the agent (or its owner) decides",
    contact.PENDING_NEXT_STEP:
        "Wait for the decision: it is sent to your A2A endpoint if you published one, and skill "
        "'pircan:contact' with {'action': 'list', 'which': 'requests'} shows the request's state",
}


def a2a_error(exc: Refused, cancel: bool = False) -> A2AError:
    """The A2A error of a refusal, with its code (and context) in the error's data."""
    if exc.next_step in A2A_NEXT_STEPS:
        exc = Refused(exc.code, *exc.context, text=exc.text, next_step=A2A_NEXT_STEPS[exc.next_step],
                      retry_after_s=exc.retry_after_s)
    data = {"code": exc.code, "context": " ".join(exc.context), **exc.fields()}
    if exc.code == "NO_SUCH_TASK":
        return TaskNotFoundError(message=exc.full_text, data=data)
    if cancel and exc.code == "INVALID_TRANSITION":
        return TaskNotCancelableError(message=exc.full_text, data=data)
    if exc.code in _PARAMS:
        return InvalidParamsError(message=exc.full_text, data=data)
    return InvalidRequestError(message=exc.full_text, data=data)


def _internal(exc: Exception) -> A2AError:
    log.error("a2a request failed", exc_info=exc)
    return InternalError(message="The server failed to process the request", data={"code": "INTERNAL_ERROR"})


def _unavailable() -> A2AError:
    """The database went away (the store says so once, not per request): retry in a moment."""
    return InternalError(message=UNAVAILABLE_TEXT, data={"code": "TEMPORARILY_UNAVAILABLE", "retry_after_s": 1})


def _mapped(cancel: bool = False) -> Callable[[Any], Any]:
    """Refusals (and unexpected failures) of a handler method as A2A errors; each call counted for
    /metrics with its result and duration (a stream's: until it ends)."""
    def wrap(fn: Any) -> Any:
        name = fn.__name__.removeprefix("on_")
        if inspect.isasyncgenfunction(fn):
            @functools.wraps(fn)
            async def stream(self: Any, params: Any, context: ServerCallContext) -> AsyncGenerator[Any, None]:
                with _answered(self.state, name, cancel):
                    refuse_nul(_brought(params, context))
                    async for item in fn(self, params, context):
                        yield item
            return stream

        @functools.wraps(fn)
        async def call(self: Any, params: Any, context: ServerCallContext) -> Any:
            with _answered(self.state, name, cancel):
                refuse_nul(_brought(params, context))
                return await fn(self, params, context)
        return call
    return wrap


def _brought(params: Any, context: ServerCallContext) -> dict[str, Any]:
    """What a call brought, as plain values (for ``refuse_nul``): the agent its URL names and the
    request (its JSON form: a text part's ``text``, a data part's own keys, the metadata)."""
    request = MessageToDict(params) if isinstance(params, ProtoMessage) else params
    return {"agent": context.state.get("agent"), "request": request}


@contextlib.contextmanager
def _answered(state: Pircan, name: str, cancel: bool) -> Iterator[None]:
    """A call of the A2A method ``name``: a refusal leaves as the A2A error of its code, the database
    unreachable as TEMPORARILY_UNAVAILABLE, any other failure as INTERNAL_ERROR (logged); counted with
    its result (ok, the refusal's code, invalid for the protocol's own errors, error, cancelled when
    the client went away) and its duration."""
    started, result = time.perf_counter(), ERROR
    try:
        yield
        result = OK
    except Refused as exc:
        result = exc.code
        raise a2a_error(exc, cancel) from None
    except A2AError:
        result = INVALID
        raise
    except StoreUnavailable:
        result = "TEMPORARILY_UNAVAILABLE"
        raise _unavailable() from None
    except (asyncio.CancelledError, GeneratorExit):
        result = CANCELLED
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is the server's: logged, INTERNAL_ERROR
        raise _internal(exc) from None
    finally:
        state.stats.call("a2a", name, result, started)


class Watch:
    """The A2A requests following a task hear of each commit here (``Pircan.task_hooks``); those
    awaiting a reply are waits of the service layer (``waits``). When the HTTP listener stops, every
    queue gets None and every wait ends: waiting requests answer with what there is, streams end, and
    the shutdown does not wait for them."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.tasks: dict[int, set[asyncio.Queue[tuple[Task, TaskEntry] | None]]] = {}
        self.waits: set[Waiter] = set()
        self.stopped = False
        state.task_hooks.append(self._task)

    def stop_all(self) -> None:
        self.stopped = True
        for waiting in self.tasks.values():
            for queue in waiting:
                queue.put_nowait(None)
        for waiter in list(self.waits):
            self.state.finish_wait(waiter, "cancelled", "The server is stopping")

    def _task(self, task: Task, entry: TaskEntry) -> None:
        for queue in self.tasks.get(task.id, ()):
            queue.put_nowait((task, entry))

    @contextlib.contextmanager
    def task(self, ident: int) -> Iterator[asyncio.Queue[tuple[Task, TaskEntry] | None]]:
        queue: asyncio.Queue[tuple[Task, TaskEntry] | None] = asyncio.Queue()
        if self.stopped:
            queue.put_nowait(None)
        self.tasks.setdefault(ident, set()).add(queue)
        try:
            yield queue
        finally:
            held = self.tasks.get(ident)
            if held is not None:
                held.discard(queue)
                if not held:
                    del self.tasks[ident]


async def _next(queue: asyncio.Queue[Any], deadline: float) -> Any:
    """The next item, or None once the loop's clock passes ``deadline`` (or the listener stops)."""
    remaining = deadline - asyncio.get_running_loop().time()
    if remaining <= 0:
        return None
    try:
        return await asyncio.wait_for(queue.get(), remaining)
    except TimeoutError:
        return None


def _string(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Refused("INVALID_PARAMS", key, text=f"The metadata '{key}' is a string")
    return value


class GatewayHandler(RequestHandler):
    def __init__(self, state: Pircan, watch: Watch) -> None:
        self.state = state
        self.watch = watch

    # who and what ------------------------------------------------------------------------------

    @staticmethod
    def _caller(context: ServerCallContext) -> str:
        identity = context.state.get("identity")
        if identity is None:  # the route lets nothing through without one
            raise Refused("ACCOUNT_REQUIRED")
        return str(identity.account)

    @staticmethod
    def _agent(context: ServerCallContext) -> str | None:
        agent = context.state.get("agent")
        return None if agent is None else str(agent)

    def _wait_ms(self, params: pb.SendMessageRequest) -> int:
        return 0 if params.configuration.return_immediately else self.state.cfg.a2a_wait_ms

    @staticmethod
    def _text(params: pb.SendMessageRequest) -> str:
        text = text_of(params.message)
        if text is None:
            raise ContentTypeNotSupportedError(message="The network carries text parts only",
                                               data={"code": "INVALID_PARAMS", "context": "parts"})
        return text

    # sending -------------------------------------------------------------------------------------

    async def _send(self, params: pb.SendMessageRequest, context: ServerCallContext
                    ) -> tuple[str, pb.Message | None, Task | None, bool]:
        """Do what a SendMessage asks for: (caller, the answer for a message or an intro, or the task
        created, answered or moved on, and whether the answer waits for the task's next changes)."""
        validate_history_length(params.configuration)
        caller, agent = self._caller(context), self._agent(context)
        meta = metadata_of(params)
        unknown = sorted(set(meta) - METADATA_KEYS)
        if unknown:
            raise Refused("INVALID_PARAMS", unknown[0], text=f"Unknown metadata '{unknown[0]}': a message's metadata "
                                                            f"names {', '.join(sorted(METADATA_KEYS))} only",
                          next_step="See the network's card for its skills (metadata 'skill')")
        state = self.state
        network_skill = _string(meta, "skill")
        if network_skill in skills.SKILLS:
            if agent is not None or params.message.task_id:
                raise Refused("INVALID_PARAMS", network_skill, text=f"{network_skill} is a skill of the network",
                              next_step=f"Send it to the network's endpoint {state.api.http_base_url}"
                                        f"{cards.GATEWAY_PATH}")
            return caller, await self._network_skill(caller, network_skill, params.message), None, False
        text = self._text(params)
        if params.message.task_id:  # wherever it is sent: a task's target moves it on, its requester answers it
            move = _string(meta, "state")
            if move is not None:
                task = await tasks.update_task(state, caller, params.message.task_id, move, text, via=VIA)
                return caller, None, task, False
            task = await tasks.provide_input(state, caller, params.message.task_id, text, via=VIA)
            return caller, None, task, True
        if agent is None:
            wanted = _string(meta, "intro")
            if wanted is not None:
                return caller, await self._intro(caller, wanted), None, False
            agent = _string(meta, "to")
            if agent is None:
                raise Refused("NEED_MORE_PARAMS", "to", text="Name the agent: metadata 'to' (or 'intro': <agent> "
                                                              "for an intro token)")
        skill = _string(meta, "skill")
        if skill is not None and skill != cards.MESSAGE_SKILL:
            task = await tasks.create_task(state, caller, agent, skill, text, via=VIA)
            return caller, None, task, True
        return caller, await self._direct(caller, agent, text, meta, params), None, False

    async def _direct(self, caller: str, agent: str, text: str, meta: dict[str, Any],
                      params: pb.SendMessageRequest) -> pb.Message:
        state = self.state
        target = state.api.casefold(agent)
        in_reply_to = _string(meta, "in_reply_to")
        if in_reply_to is None and parse_id(params.message.context_id) is not None:
            in_reply_to = await self._newest(caller, target, params.message.context_id)
        wait_ms = self._wait_ms(params)
        sent = await messages.send_message(state, caller, agent, text, in_reply_to,
                                           key=params.message.message_id or None, via=VIA)
        delivery = current_delivery()
        if not sent.created:  # a retry: the reply may have come already
            reply = await self._reply_in_history(caller, sent.message)
            if reply is not None:
                # read once the answer is written to a client still there: a client gone before puts it back
                if await messages.acknowledge(state, caller, [hexid(reply.id)]) and delivery is not None:
                    delivery.hold(lambda: waits.put_back(state, caller, reply))
                return message_proto(reply)
        if not wait_ms:
            return receipt_proto(sent, state.new_id(), 0)
        # the wait every transport shares: the reply is taken once its answer reaches a client still there
        kind, value = await waits.await_reply(state, sent.message, wait_ms, delivery, self.watch.waits)
        if kind != "message":
            return receipt_proto(sent, state.new_id(), wait_ms, kind, value)
        return message_proto(value)

    async def _newest(self, caller: str, target: str, conversation_id: str) -> str:
        """What a message in an A2A context answers: the newest message of ``target`` in that
        conversation, else its first message, whose id is the conversation's (so a retry answers
        the same one); send_message refuses one that is not a message between the two."""
        try:
            _, found = await messages.history(self.state, caller, conversation_id, limit=messages.HISTORY_MAX)
        except Refused:
            return conversation_id
        theirs = [m for m in found if m.sender == target and m.recipient == caller]
        return hexid(theirs[-1].id) if theirs else conversation_id

    async def _reply_in_history(self, caller: str, sent: StoredMessage) -> StoredMessage | None:
        _, found = await messages.history(self.state, caller, hexid(sent.conversation_id),
                                          limit=messages.HISTORY_MAX)
        return next((m for m in found if m.sender == sent.recipient and m.id > sent.id), None)

    async def _network_skill(self, caller: str, skill: str, message: pb.Message) -> pb.Message:
        """A call of one of the network's skills: the arguments are the message's data part(s)."""
        args: dict[str, Any] = {}
        for part in message.parts:
            if part.WhichOneof("content") != "data":
                continue
            data = MessageToDict(part.data)
            if not isinstance(data, dict):
                raise Refused("INVALID_PARAMS", "parts", text="A call's data part is an object of arguments")
            args.update(data)
        text, result = await skills.run_skill(self.state, caller, skill, args)
        return data_message(self.state.new_id(), text, result)

    async def _intro(self, caller: str, target: str) -> pb.Message:
        intro = await intros.issue_intro(self.state, caller, target, via=VIA)
        return data_message(self.state.new_id(), f"An intro token for {intro.target}, valid until "
                                                 f"{ts(intro.expires_at)}", intros.intro_json(intro))

    async def _view(self, caller: str, task_id: str, config: Any = None) -> tuple[pb.Task, Task, list[TaskEntry]]:
        view = await tasks.get_task(self.state, caller, task_id)
        return apply_history_length(task_proto(view.task, view.entries), config), view.task, view.entries

    @_mapped()
    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext
                              ) -> pb.Task | pb.Message:
        caller, answer, task, follow = await self._send(params, context)
        if answer is not None:
            return answer
        assert task is not None
        wait_ms = self._wait_ms(params) if follow else 0
        if wait_ms and task.state not in SETTLED:
            # the change that created or answered it has committed; later ones come through the watch
            with self.watch.task(task.id) as changes:
                deadline = asyncio.get_running_loop().time() + wait_ms / 1000
                while True:
                    item = await _next(changes, deadline)
                    if item is None or item[1].state in SETTLED:
                        break
        return (await self._view(caller, hexid(task.id), params.configuration))[0]

    @_mapped()
    async def on_message_send_stream(self, params: pb.SendMessageRequest, context: ServerCallContext
                                     ) -> AsyncGenerator[Any, None]:
        caller, answer, task, follow = await self._send(params, context)
        if answer is not None:
            yield answer
            return
        assert task is not None
        if not follow:  # the target's own move: the task as it is now
            yield (await self._view(caller, hexid(task.id), params.configuration))[0]
            return
        with self.watch.task(task.id) as changes:
            async for event in self._follow(caller, hexid(task.id), changes, params.configuration, True):
                yield event

    async def _follow(self, caller: str, task_id: str, changes: asyncio.Queue[Any], config: Any,
                      stop_for_input: bool) -> AsyncGenerator[Any, None]:
        """The task, then each change after it (an artifact for a result, then the status update)
        until it is final (or, ``stop_for_input``, asks for input), or the listener stops."""
        shown, task, entries = await self._view(caller, task_id, config)
        yield shown
        last = entries[-1].id if entries else 0
        current = task.state
        while current not in FINAL and not (stop_for_input and current == "input-required"):
            if await changes.get() is None:  # the listener stops
                return
            _, task, entries = await self._view(caller, task_id)
            for entry in entries:
                if entry.id <= last:
                    continue
                last, current = entry.id, entry.state
                if entry.kind == "result" and entry.text:
                    yield artifact_event(task, entry)
                yield status_event(task, entry)
            stop_for_input = True  # a subscription that began at input-required ends at the next question

    # tasks -----------------------------------------------------------------------------------------

    @_mapped()
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task | None:
        validate_history_length(params)
        return (await self._view(self._caller(context), params.id, params))[0]

    @_mapped()
    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        caller = self._caller(context)
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= 100:
            raise InvalidParamsError(message="page_size is 1 to 100", data={"code": "INVALID_PARAMS",
                                                                            "context": "page_size"})
        wanted = PIRCAN_STATES.get(params.status) if params.status else None
        found = await tasks.list_tasks(self.state, caller, None, wanted, self._agent(context), size)
        if params.context_id:
            found = [t for t in found if hexid(t.id) == params.context_id]
        return pb.ListTasksResponse(tasks=[task_proto(t) for t in found], page_size=size, total_size=len(found))

    @_mapped(cancel=True)
    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task | None:
        caller = self._caller(context)
        reason = params.metadata["reason"] if "reason" in params.metadata else ""  # noqa: SIM401 - a Struct has no get
        await tasks.cancel_task(self.state, caller, params.id, reason if isinstance(reason, str) else "", via=VIA)
        return (await self._view(caller, params.id))[0]

    @_mapped()
    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
                                   ) -> AsyncGenerator[Any, None]:
        caller = self._caller(context)
        with self.watch.task(parse_id(params.id) or 0) as changes:
            view = await tasks.get_task(self.state, caller, params.id)
            if view.task.state in FINAL:
                raise UnsupportedOperationError(message=f"Task {params.id} is {view.task.state}: nothing follows",
                                                data={"code": "INVALID_TRANSITION", "context": params.id})
            async for event in self._follow(caller, params.id, changes, None, False):
                yield event

    # cards and what the network does not offer ---------------------------------------------------------

    @_mapped()
    async def on_get_extended_agent_card(self, params: pb.GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> pb.AgentCard:
        caller, agent = self._caller(context), self._agent(context)
        if agent is None:
            return cards.network_card(self.state)
        card = await cards.extended_card(self.state, caller, self.state.api.casefold(agent))
        if card is None:
            raise Refused("NO_SUCH_ACCOUNT", agent, text="No such agent (or it has no card)")
        return card

    async def on_create_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(self, params: Any, context: ServerCallContext) -> None:
        raise PushNotificationNotSupportedError

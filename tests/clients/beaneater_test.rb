# Black-box test of delayqd with a real third-party beanstalkd client:
# Debian's ruby-beaneater (Beaneater 1.1), driven through its public API.
#
# Starts its own delayqd on a free loopback port and stops it at the end.
#   DELAYQD         path of the delayqd binary (default: build/delayqd)
#   DELAYQ_PORT     use this port instead of a free one
#   BEANSTALKD_ADDR talk to an already running server (host:port) instead
#                   of starting one, e.g. 127.0.0.1:11300 for Debian's beanstalkd
# Runs with minitest (bundled with Ruby); exits non-zero on any failure:
#   ruby tests/clients/beaneater_test.rb
require 'minitest/autorun'
require 'beaneater'
require 'socket'
require 'securerandom'
require 'tempfile'
require 'tmpdir'
require 'fileutils'
require 'timeout'
require 'digest'

module DelayqServer
  ROOT = File.expand_path('../..', __dir__)

  class << self
    attr_reader :address, :pid, :log

    def start
      if ENV['BEANSTALKD_ADDR'] && !ENV['BEANSTALKD_ADDR'].empty?
        @address = ENV['BEANSTALKD_ADDR']
        return
      end
      binary = ENV.fetch('DELAYQD', File.join(ROOT, 'build', 'delayqd'))
      raise "delayqd not found at #{binary} (set DELAYQD)" unless File.executable?(binary)

      port = (ENV['DELAYQ_PORT'] || free_port).to_i
      @log = Tempfile.new('delayqd-beaneater')
      @data_dir = Dir.mktmpdir('delayqd-beaneater-data')
      at_exit { FileUtils.remove_entry(@data_dir) if File.directory?(@data_dir) }
      @pid = Process.spawn(binary, '-l', '127.0.0.1', '-p', port.to_s, '-b', @data_dir,
                           in: File::NULL, out: File::NULL, err: @log.path)
      @address = "127.0.0.1:#{port}"
      wait_until_accepting(port)
    end

    def free_port
      s = TCPServer.new('127.0.0.1', 0)
      port = s.addr[1]
      s.close
      port
    end

    def wait_until_accepting(port)
      deadline = Time.now + 20
      loop do
        raise "delayqd exited early:\n#{File.read(@log.path)}" if Process.waitpid(@pid, Process::WNOHANG)
        begin
          TCPSocket.new('127.0.0.1', port).close
          return
        rescue Errno::ECONNREFUSED
          raise "delayqd did not accept connections within 20 s" if Time.now > deadline
          sleep 0.02
        end
      end
    end

    def external?
      !ENV['BEANSTALKD_ADDR'].nil? && !ENV['BEANSTALKD_ADDR'].empty?
    end

    # A delayqd of the caller's own (in memory, with `args`), for a test that
    # changes the whole server (drain mode, tokens). Returns [pid, address];
    # stop it with stop_extra.
    def spawn_extra(*args)
      binary = ENV.fetch('DELAYQD', File.join(ROOT, 'build', 'delayqd'))
      port = free_port
      pid = Process.spawn(binary, '-l', '127.0.0.1', '-p', port.to_s, '--in-memory', *args,
                          in: File::NULL, out: File::NULL, err: File::NULL)
      deadline = Time.now + 20
      begin
        TCPSocket.new('127.0.0.1', port).close
      rescue Errno::ECONNREFUSED
        raise 'the extra delayqd did not accept connections within 20 s' if Time.now > deadline
        sleep 0.02
        retry
      end
      [pid, "127.0.0.1:#{port}"]
    end

    # SIGTERM; returns the exit status.
    def stop_extra(pid)
      Process.kill('TERM', pid)
      Timeout.timeout(10) { Process.wait2(pid)[1] }
    end

    def alive?
      return true unless @pid
      Process.waitpid(@pid, Process::WNOHANG).nil?
    rescue Errno::ECHILD
      false
    end

    # SIGTERM; returns the exit status (nil if it had to be killed).
    def stop
      return unless @pid
      Process.kill('TERM', @pid)
      status = nil
      begin
        Timeout.timeout(10) { _, status = Process.wait2(@pid) }
      rescue Timeout::Error
        Process.kill('KILL', @pid)
        Process.wait(@pid)
      end
      @pid = nil
      status
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end
end

DelayqServer.start
Minitest.after_run do
  status = DelayqServer.stop
  if DelayqServer.log && (status.nil? || !status.success?)
    warn "delayqd did not exit cleanly on SIGTERM (#{status.inspect}); its log:\n#{File.read(DelayqServer.log.path)}"
    exit!(1)
  end
end

class BeaneaterAgainstDelayqTest < Minitest::Test
  def setup
    @client = Beaneater.new(DelayqServer.address)
    # Every test gets tubes of its own: the server is shared.
    @tube_name = "bt-#{name.sub(/^test_/, '')}-#{SecureRandom.hex(4)}".tr('_', '-')[0, 200]
    @tube = @client.tubes[@tube_name]
  end

  def teardown
    @client&.close
    (@others || []).each(&:close)
    assert DelayqServer.alive?, 'delayqd died during the test'
  end

  def other_client
    c = Beaneater.new(DelayqServer.address)
    (@others ||= []) << c
    c
  end

  def test_put_reserve_delete
    res = @tube.put('hello', pri: 5, ttr: 30)
    assert_equal 'INSERTED', res[:status]
    id = res[:id]
    job = @tube.reserve(1)
    assert_equal id, job.id
    assert_equal 'hello', job.body
    assert job.reserved?
    assert_equal @tube_name, job.tube
    assert_equal 30, job.ttr
    assert_equal 5, job.pri
    job.delete
    refute job.exists?
    assert_nil @client.jobs.find(id)
    assert_raises(Beaneater::NotFoundError) { @client.connection.transmit("delete #{id}") }
  end

  # Beaneater's tubes.reserve without a timeout sends the plain `reserve`;
  # it has no call for reserve-job, which goes through its connection.
  def test_plain_reserve_and_reserve_job
    @client.tubes.watch!(@tube_name)
    first = @tube.put('first')[:id]
    delayed = @tube.put('later', delay: 100)[:id]
    job = @client.tubes.reserve
    assert_equal first, job.id
    assert_equal 'first', job.body
    job.delete
    res = @client.connection.transmit("reserve-job #{delayed}")
    assert_equal 'RESERVED', res[:status]
    assert_equal delayed, res[:id]
    assert_equal 'later', res[:body]
    assert_equal 'reserved', @client.jobs.find(delayed).stats.state
    assert_raises(Beaneater::NotFoundError) { @client.connection.transmit("reserve-job #{delayed}") }
    assert_raises(Beaneater::NotFoundError) { @client.connection.transmit('reserve-job 999999999') }
  end

  # A put whose body is followed by two bytes other than CRLF: the client
  # maps the reply to its ExpectedCrlfError, and the server goes on with the
  # next command. (A client's own put always sizes its body right, so the
  # bad one is written on the client's socket.)
  def test_expected_crlf
    @client.tubes.use(@tube_name)
    @client.connection.connection.write("put 0 0 60 3\r\nabcde")
    assert_raises(Beaneater::ExpectedCrlfError) { @client.connection.transmit('list-tube-used') }
    assert_equal "USING #{@tube_name}\r\n", @client.connection.connection.readline
    assert_nil @tube.peek(:ready)
    assert_equal 'INSERTED', @tube.put('fine')[:status]
    assert_equal 'fine', @tube.peek(:ready).body
  end

  # SIGUSR1 puts the server in drain mode, as beanstalkd: puts are refused
  # with DRAINING (beaneater retries three times, then raises), everything
  # else goes on. On a delayqd of its own: drain mode lasts until the exit.
  def test_draining_after_sigusr1
    skip 'needs a delayqd of its own (BEANSTALKD_ADDR is set)' if DelayqServer.external?
    pid, address = DelayqServer.spawn_extra
    producer = Beaneater.new(address)
    tube = producer.tubes['drain']
    id = tube.put('before')[:id]
    refute producer.stats.draining
    Process.kill('USR1', pid)
    deadline = Time.now + 5
    sleep 0.02 until producer.stats.draining || Time.now > deadline
    assert_equal true, producer.stats.draining
    assert_raises(Beaneater::DrainingError) { tube.put('after') }
    worker = Beaneater.new(address)
    worker.tubes.watch!('drain')
    job = worker.tubes.reserve(0)
    assert_equal id, job.id
    assert_equal 'before', job.body
    job.delete
    assert_equal 1, worker.stats.total_jobs
    worker.close
    assert DelayqServer.stop_extra(pid).success?, 'the drained delayqd did not exit 0 on SIGTERM'
    pid = nil
  ensure
    producer&.close
    if pid
      Process.kill('KILL', pid)
      Process.wait(pid)
    end
  end

  # A client outside the trusted networks (here none are) authenticates
  # with delayq's `auth` through Beaneater's raw transmit; before that every
  # command is refused, and Beaneater hands the UNAUTHORIZED status back. A
  # token for rb.* then works through Beaneater's own calls, and may not
  # touch another topic.
  def test_a_token_authenticates_a_connection
    skip 'needs a delayqd of its own (BEANSTALKD_ADDR is set)' if DelayqServer.external?
    secret = "dq_#{SecureRandom.hex(16)}"
    tokens = Tempfile.new(['tokens', '.toml'])
    tokens.write(<<~TOML)
      [[token]]
      name = "rb-worker"
      sha256 = "#{Digest::SHA256.hexdigest(secret)}"
      topics = ["rb.*"]
      rights = ["produce", "consume"]
    TOML
    tokens.flush
    pid, address = DelayqServer.spawn_extra('--auth-file', tokens.path, '--trusted-networks', 'none')
    client = Beaneater.new(address)
    assert_equal 'UNAUTHORIZED', client.connection.transmit('stats-tube default')[:status]
    assert_equal 'UNAUTHORIZED', client.connection.transmit('auth dq_not-this-one')[:status]
    assert_equal 'AUTHENTICATED', client.connection.transmit("auth #{secret}")[:status]
    tube = client.tubes['rb.orders']
    id = tube.put('hello')[:id]
    client.tubes.watch!('rb.orders')
    job = client.tubes.reserve(1)
    assert_equal id, job.id
    assert_equal 'hello', job.body
    job.delete
    assert_equal ['rb.orders'], client.tubes.all.map(&:name)
    assert_equal 'FORBIDDEN', client.connection.transmit('use payments')[:status]
    assert_equal 'FORBIDDEN', client.connection.transmit('stats')[:status]
    client.close
    assert DelayqServer.stop_extra(pid).success?, 'delayqd did not exit 0 on SIGTERM'
    pid = nil
  ensure
    tokens&.close!
    if pid
      Process.kill('KILL', pid)
      Process.wait(pid)
    end
  end

  def test_binary_body_round_trip
    body = (0..255).map(&:chr).join.b * 4 + "\r\n"
    @tube.put(body)
    job = @tube.reserve(1)
    assert_equal body, job.body.b
    job.delete
  end

  def test_priority_order_and_release
    @tube.put('low', pri: 20)
    @tube.put('high', pri: 10)
    first = @tube.reserve(1)
    assert_equal 'high', first.body
    first.release(pri: 30, delay: 0)
    refute first.reserved
    assert_equal 'low', @tube.reserve(1).body
    again = @tube.reserve(1)
    assert_equal 'high', again.body
    stats = again.stats
    assert_equal 30, stats.pri
    assert_equal 1, stats.releases
    assert_equal 2, stats.reserves
    again.delete
  end

  def test_release_with_delay
    @tube.put('later')
    job = @tube.reserve(1)
    job.release(delay: 1)
    assert_equal 'delayed', job.stats.state
    assert_equal job.id, @tube.peek(:delayed).id
    started = Time.now
    assert_equal job.id, @tube.reserve(5).id
    assert_operator Time.now - started, :>=, 0.5
  end

  def test_bury_and_kick
    @tube.put('a')
    @tube.put('b')
    a = @tube.reserve(1)
    b = @tube.reserve(1)
    a.bury
    b.bury(pri: 7)
    assert_equal a.id, @tube.peek(:buried).id
    assert_equal 2, @tube.stats.current_jobs_buried
    assert_equal 'buried', b.stats.state
    assert_equal 7, b.stats.pri
    assert_equal 1, b.stats.buries
    assert_equal({ status: 'KICKED', id: '1' }, @tube.kick(1))
    assert_equal 'ready', a.stats.state
    b.kick # kick-job
    assert_equal 'ready', b.stats.state
    assert_equal 1, b.stats.kicks
    assert_nil @tube.peek(:buried)
    assert_equal({ status: 'KICKED', id: '0' }, @tube.kick(10))
  end

  def test_kick_delayed_jobs
    ids = 3.times.map { |i| @tube.put("d#{i}", delay: 100)[:id] }
    assert_equal 3, @tube.stats.current_jobs_delayed
    assert_equal ids.first, @tube.peek(:delayed).id
    assert_equal({ status: 'KICKED', id: '2' }, @tube.kick(2))
    assert_equal 1, @tube.stats.current_jobs_delayed
    assert_equal 2, @tube.stats.current_jobs_ready
    assert_equal ids[0], @tube.peek(:ready).id
  end

  def test_touch_extends_ttr
    @tube.put('slow', ttr: 2)
    job = @tube.reserve(1)
    sleep 1.2
    job.touch
    sleep 1.2
    stats = job.stats
    assert_equal 'reserved', stats.state
    assert_equal 0, stats.timeouts
    job.delete
  end

  def test_ttr_expiry_returns_job
    @tube.put('expiring', ttr: 1)
    job = @tube.reserve(1)
    other = other_client.tubes[@tube_name]
    again = other.reserve(5)
    assert_equal job.id, again.id
    assert_equal 1, again.stats.timeouts
    assert_raises(Beaneater::NotFoundError) { job.delete }
    again.delete
  end

  def test_peek_states
    assert_nil @tube.peek(:ready)
    assert_nil @tube.peek(:delayed)
    assert_nil @tube.peek(:buried)
    ready = @tube.put('r', pri: 3)[:id]
    delayed = @tube.put('d', delay: 60)[:id]
    assert_equal 'r', @tube.peek(:ready).body
    assert_equal ready, @tube.peek(:ready).id
    assert_equal delayed, @tube.peek(:delayed).id
    assert_equal 'd', @client.jobs.find(delayed).body
    assert_nil @client.jobs.find(999_999_999)
  end

  def test_reserve_timeouts_and_deadline_soon
    @client.tubes.watch!(@tube_name)
    assert_raises(Beaneater::TimedOutError) { @client.tubes.reserve(0) }
    started = Time.now
    assert_raises(Beaneater::TimedOutError) { @client.tubes.reserve(1) }
    assert_operator Time.now - started, :>=, 0.9
    @tube.put('short', ttr: 1)
    @client.tubes.reserve(0)
    assert_raises(Beaneater::DeadlineSoonError) { @client.tubes.reserve(0) }
  end

  def test_job_put_on_one_connection_is_reserved_on_another
    consumer = other_client
    consumer.tubes.watch!(@tube_name)
    waiter = Thread.new { consumer.tubes.reserve(5) }
    sleep 0.2
    id = @tube.put('cross')[:id]
    job = waiter.value
    assert_equal id, job.id
    assert_equal 'cross', job.body
    job.delete
  end

  def test_reserved_jobs_return_when_the_connection_closes
    id = @tube.put('orphan')[:id]
    worker = Beaneater.new(DelayqServer.address)
    assert_equal id, worker.tubes[@tube_name].reserve(1).id
    assert_equal 'reserved', @client.jobs.find(id).stats.state
    worker.close
    job = @tube.reserve(5)
    assert_equal id, job.id
    assert_equal 2, job.stats.reserves
    job.delete
  end

  def test_tubes_use_watch_ignore
    @client.tubes.use(@tube_name)
    assert_equal @tube_name, @client.tubes.used.name
    a = "#{@tube_name}-a"
    b = "#{@tube_name}-b"
    @client.tubes.watch(a, b)
    assert_equal ['default', a, b], @client.tubes.watched.map(&:name)
    @client.tubes.ignore('default', a)
    assert_equal [b], @client.tubes.watched.map(&:name)
    assert_raises(Beaneater::NotIgnoredError) { @client.tubes.ignore(b) }
    names = @client.tubes.all.map(&:name)
    assert_includes names, 'default'
    assert_includes names, @tube_name
    assert_includes names, b
    refute_includes names, a
    @client.tubes.watch!(a)
    assert_equal [a], @client.tubes.watched.map(&:name)
    assert_raises(Beaneater::InvalidTubeName) { @client.tubes.use('bad name') }
    assert_raises(Beaneater::InvalidTubeName) { @client.tubes.watch('-bad') }
  end

  def test_tube_stats_and_server_stats
    @tube.put('x', pri: 1)
    @tube.put('y', pri: 2000)
    @tube.put('z', delay: 50)
    s = @tube.stats
    assert_equal @tube_name, s.name
    assert_equal 1, s.current_jobs_urgent
    assert_equal 2, s.current_jobs_ready
    assert_equal 1, s.current_jobs_delayed
    assert_equal 3, s.total_jobs
    assert_equal 0, s.pause
    stats = @client.stats
    %w[current_jobs_urgent current_jobs_ready cmd_put total_jobs max_job_size current_tubes
       current_connections uptime draining version pid].each do |k|
      assert_includes stats.keys, k
    end
    assert_operator stats.total_jobs, :>=, 3
    assert_operator stats.current_connections, :>=, 1
    assert_equal 65_535, stats.max_job_size
    assert_equal false, stats.draining
    assert_kind_of String, stats.version
  end

  def test_pause_tube
    @tube.put('paused')
    @tube.pause(1)
    assert_equal 1, @tube.stats.pause
    started = Time.now
    job = @tube.reserve(5)
    assert_operator Time.now - started, :>=, 0.6
    assert_equal 'paused', job.body
    assert_raises(Beaneater::NotFoundError) { @client.tubes['no-such-tube-here'].pause(1) }
  end

  def test_job_too_big_and_errors
    assert_raises(Beaneater::JobTooBigError) { @tube.put('x' * 65_536) }
    assert_equal 'INSERTED', @tube.put('x' * 65_535)[:status]
    assert_raises(Beaneater::UnknownCommandError) { @client.connection.transmit('frobnicate') }
    assert_raises(Beaneater::BadFormatError) { @client.connection.transmit('kick x') }
    assert_raises(Beaneater::NotFoundError) { @client.connection.transmit('touch 999999999') }
  end

  def test_tube_clear
    @tube.put('r')
    @tube.put('d', delay: 100)
    @tube.put('b')
    @client.tubes.watch!(@tube_name)
    buried = @client.tubes.reserve(1)
    buried.bury
    @tube.clear
    s = @tube.stats
    assert_equal 0, s.current_jobs_ready + s.current_jobs_delayed + s.current_jobs_buried
  end

  def test_jobs_process_loop
    bodies = 5.times.map { |i| "work-#{i}" }
    bodies.each { |b| @tube.put(b) }
    seen = []
    @client.jobs.register(@tube_name) do |job|
      seen << job.body
      @client.jobs.stop! if seen.size == bodies.size
    end
    Timeout.timeout(20) { @client.jobs.process!(reserve_timeout: 1) }
    assert_equal bodies, seen
    assert_equal 0, @tube.stats.current_jobs_ready
    assert_equal 0, @tube.stats.current_jobs_reserved
  end
end

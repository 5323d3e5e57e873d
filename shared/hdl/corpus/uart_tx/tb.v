// Self-checking testbench for uart_tx (CLKS_PER_BIT = 4): samples the line in the middle of
// each bit of two frames and checks start bit, data bits LSB first, stop bit, and busy.
`timescale 1ns/1ps
module tb;
    localparam CPB = 4;
    reg        clk = 1'b0;
    reg        rst = 1'b1;
    reg        start = 1'b0;
    reg  [7:0] data = 8'h00;
    wire       tx, busy;
    integer    errors = 0;

    uart_tx #(.CLKS_PER_BIT(CPB)) dut (.clk(clk), .rst(rst), .start(start), .data(data),
                                       .tx(tx), .busy(busy));

    always #5 clk = ~clk;

    task check_bit(input want, input integer index);
        begin
            repeat (CPB / 2) @(negedge clk);
            if (tx !== want || busy !== 1'b1) begin
                $error("bit %0d of frame %h: tx=%b busy=%b, expected tx=%b busy=1",
                       index, data, tx, busy, want);
                errors = errors + 1;
            end
            repeat (CPB - CPB / 2) @(negedge clk);
        end
    endtask

    task send(input [7:0] value);
        integer i;
        begin
            data  = value;
            start = 1'b1;
            @(negedge clk);
            start = 1'b0;
            check_bit(1'b0, -1);
            for (i = 0; i < 8; i = i + 1)
                check_bit(value[i], i);
            check_bit(1'b1, 8);
            repeat (2) @(negedge clk);
            if (busy !== 1'b0 || tx !== 1'b1) begin
                $error("after frame %h: busy=%b tx=%b, expected idle", value, busy, tx);
                errors = errors + 1;
            end
        end
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst = 1'b0;
        @(negedge clk);
        if (tx !== 1'b1 || busy !== 1'b0) begin
            $error("idle line: tx=%b busy=%b", tx, busy);
            errors = errors + 1;
        end
        send(8'h4B);
        send(8'h1E);
        if (errors != 0)
            $fatal(1, "uart_tx: %0d check(s) failed", errors);
        $display("uart_tx: all checks passed");
        $finish;
    end
endmodule
